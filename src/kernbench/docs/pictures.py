"""Regenerate docs/pictures/ from the blocks that draw them (``python -m kernbench.docs``).

A picture of the docs is drawn by the block shown next to it, marked ``<!-- doctest:
picture -->``: its commands write ``docs/pictures/<name>.png`` as they would from the
repository root. Here each such block runs in a scratch folder (after the earlier blocks of
its page that are not heavy, as in the doc tests), and what it wrote under
``docs/pictures/`` is reduced to a 256-colour palette and copied into the repository. So a
picture is always the one its page's command draws, on the preset that command names.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from kernbench.docs.blocks import Block, all_blocks
from kernbench.docs.session import DocSession
from kernbench.errors import BadInputError

PICTURE = re.compile(r"docs/pictures/([\w.-]+\.png)\b")


def drawn(block: Block) -> list[str]:
    """The picture files (``NAME.png``) a picture block writes."""
    return PICTURE.findall(block.text)


def picture_blocks(root: Path) -> list[Block]:
    return [b for b in all_blocks(root) if b.directive.picture]


def regenerate(root: Path, only: tuple[str, ...] = (),
               progress: Callable[[str], object] = print) -> list[Path]:
    """Run every picture block (or those drawing a name in ``only``) and store what they
    draw in ``root/docs/pictures``; return the pictures written."""
    blocks = [b for b in picture_blocks(root) if not only or set(drawn(b)) & set(only)]
    unknown = set(only) - {n for b in picture_blocks(root) for n in drawn(b)}
    if unknown:
        raise BadInputError(f"no block draws {', '.join(sorted(unknown))}; "
                            "`python -m kernbench.docs --list` lists the pictures")
    written: list[Path] = []
    for doc in dict.fromkeys(b.path for b in blocks):
        with tempfile.TemporaryDirectory(prefix="kbdocs-") as tmp:
            session = DocSession(root, doc, Path(tmp))
            for block in (b for b in blocks if b.path == doc):
                progress(f"{block.where}: {', '.join(drawn(block))}")
                session.run(block)
                for name in drawn(block):
                    written.append(store(Path(tmp) / "docs" / "pictures" / name,
                                         root / "docs" / "pictures" / name))
    return written


def store(made: Path, target: Path) -> Path:
    """``made`` reduced to a 256-colour palette (no dithering: flat plot colours stay flat),
    written to ``target``."""
    from PIL import Image  # matplotlib's own dependency

    if not made.is_file():
        raise BadInputError(f"the block that draws {target.name} wrote no {made.name}")
    with Image.open(made) as img:
        small = img.convert("RGB").quantize(colors=256, dither=Image.Dither.NONE)
        target.parent.mkdir(parents=True, exist_ok=True)
        small.save(target, optimize=True)
    return target
