"""``python -m kernbench.docs [NAME.png ...] [--list] [--root DIR]``: redraw the pictures of
the docs from the blocks next to them (all of them, or the ones named); run from the
repository root (or name it with ``--root``). Bad input: one line, exit 2."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernbench.docs.pictures import drawn, picture_blocks, regenerate
from kernbench.errors import DocBlockError, KernbenchError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernbench.docs",
                                     description="Redraw docs/pictures/ from the docs' blocks.")
    parser.add_argument("names", nargs="*", metavar="NAME.png", help="only these pictures")
    parser.add_argument("--list", action="store_true", help="list the pictures and their blocks")
    parser.add_argument("--root", default=".", help="the repository root [default: .]")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    try:
        if not (root / "docs").is_dir() or not (root / "README.md").is_file():
            raise KernbenchError(f"{str(root)!r} is not the repository root (no README.md "
                                 "and docs/); run from it or pass --root")
        if args.list:
            for block in picture_blocks(root):
                heavy = " (heavy)" if block.directive.heavy else ""
                print(f"{block.where}{heavy}: {', '.join(drawn(block))}")
            return 0
        for path in regenerate(root, tuple(args.names)):
            print(f"wrote {path.relative_to(root)}")
    except DocBlockError as exc:  # a block did not do what its page says: all of it
        print(f"python -m kernbench.docs: {exc}", file=sys.stderr)
        return 1
    except KernbenchError as exc:
        print(f"python -m kernbench.docs: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
