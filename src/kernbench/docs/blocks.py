"""The code blocks of the project's documentation and what each one asks of its test.

A fenced block is tested by its language (``python`` runs, ``sh`` runs command by command
with its printed figures checked, ``toml`` is a file a later command reads); an HTML comment
on the line before it (invisible on the rendered page) says more::

    <!-- doctest: heavy -->                 runs only in the slow job (the sizes the doc shows)
    <!-- doctest: skip installs the package --> not run, and why (the README's set-up lines)
    <!-- doctest: file mymod.py -->         written into the doc's folder, for the commands after it
    <!-- doctest: excerpt examples/x.py --> a verbatim part of that repository file
    <!-- doctest: synopsis -->              command lines whose commands and options must exist
    <!-- doctest: picture -->               draws pictures under docs/pictures/ (``python -m
                                            kernbench.docs`` regenerates them from these blocks)

Words combine (``<!-- doctest: heavy picture -->``). A block of language ``text`` is never
run: it shows output, a layout or a message, never a command (``text_blocks_with_commands``
finds one that does).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernbench.errors import BadInputError

#: the documents whose blocks are tested, relative to the repository root (ADRs are records
#: of their time, not instructions)
DOCUMENTS = ("README.md", "docs/*.md")
#: languages that run, and the ones that only show something
RUN = ("python", "sh", "toml")
SHOW = ("text",)
WORDS = ("heavy", "skip", "file", "excerpt", "synopsis", "picture")
FENCE = re.compile(r"^(?P<fence>```+)(?P<lang>[\w+-]*)[ \t]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                   re.M | re.S)
DIRECTIVE = re.compile(r"<!--\s*doctest:\s*(?P<words>(?:(?!-->).)*?)\s*-->\s*\n\s*\Z", re.S)
HEADING = re.compile(r"^#{1,6} (?P<title>.+)$", re.M)


@dataclass(frozen=True)
class Directive:
    """What the comment before a block asks: ``heavy``, ``skip`` (with its reason), ``file``
    (a name), ``excerpt`` (a repository path), ``synopsis``, ``picture``."""

    heavy: bool = False
    skip: str | None = None
    file: str | None = None
    excerpt: str | None = None
    synopsis: bool = False
    picture: bool = False

    @classmethod
    def parse(cls, words: str, where: str) -> Directive:
        """``heavy picture``, ``skip REASON``, ``file NAME``, ``excerpt PATH``."""
        tokens = words.split()
        kw: dict[str, Any] = {}
        while tokens:
            word = tokens.pop(0)
            if word == "skip":
                kw["skip"] = " ".join(tokens) or "no reason given"
                break
            if word in ("file", "excerpt"):
                if not tokens:
                    raise BadInputError(f"{where}: doctest '{word}' needs a name")
                kw[word] = tokens.pop(0)
            elif word in ("heavy", "synopsis", "picture"):
                kw[word] = True
            else:
                raise BadInputError(f"{where}: unknown doctest word {word!r}; "
                                    f"known: {', '.join(WORDS)}")
        return cls(**kw)


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its directive."""

    path: str  # the document, relative to the repository root
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    directive: Directive
    section: str  # the heading it sits under ("" before the first)
    start: int = 0  # character offsets of the whole block (fences included) in the document
    end: int = 0

    @property
    def runs(self) -> bool:
        """Whether a test executes it (a ``file`` block is written, not executed)."""
        d = self.directive
        return self.lang in ("python", "sh") and not (d.skip or d.synopsis or d.excerpt
                                                      or d.file)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def parse(text: str, path: str = "<doc>") -> list[Block]:
    """The fenced blocks of a Markdown text, in order, each with its directive."""
    fences = list(FENCE.finditer(text))
    heads = [(h.start(), h.group("title")) for h in HEADING.finditer(text)
             if not any(f.start() < h.start() < f.end() for f in fences)]
    out = []
    for m in fences:
        line = text.count("\n", 0, m.start()) + 1
        d = DIRECTIVE.search(text[max(0, m.start() - 400):m.start()])
        directive = Directive.parse(d.group("words"), f"{path}:{line}") if d else Directive()
        section = next((t for at, t in reversed(heads) if at < m.start()), "")
        out.append(Block(path, line, m.group("lang"), m.group("body"), directive, section,
                         m.start(), m.end()))
    return out


def documents(root: Path) -> list[Path]:
    """The tested documents under the repository ``root``, in a stable order."""
    found: list[Path] = []
    for pattern in DOCUMENTS:
        found += sorted(root.glob(pattern))
    return found


def all_blocks(root: Path) -> Iterator[Block]:
    for doc in documents(root):
        yield from parse(doc.read_text(encoding="utf-8"), doc.relative_to(root).as_posix())


#: a line a reader would type (``kernbench ...``, ``python ...``, ``pytest ...``)
COMMAND = re.compile(r"^\s*(\$ )?(kernbench|python3?|pytest|pip|export) ", re.M)


def text_blocks_with_commands(root: Path) -> list[str]:
    """``text`` (or unlabelled) blocks holding a command line: each should be an ``sh``
    block that runs, or say why not (``skip``/``synopsis``)."""
    return [b.where for b in all_blocks(root)
            if b.lang in ("", *SHOW) and not b.directive.synopsis and COMMAND.search(b.text)]
