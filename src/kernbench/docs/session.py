"""One document's blocks run as a reader runs them: in order, in a folder of their own.

A ``DocSession`` holds a document's scratch folder (a copy of ``examples/``, the repository's
``tests/`` linked read-only, an empty ``docs/pictures/``), the shell environment the blocks
leave behind and the namespace its Python blocks share. ``run(block)`` first runs every
earlier block of the document it has not run yet (a block may use a file, a variable or a
trace an earlier one made), so any block can be run alone, in any process.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import textwrap
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import kernbench
from kernbench.docs.blocks import Block, parse
from kernbench.docs.shell import reader_env, run_block
from kernbench.errors import DocBlockError

#: the package under test, importable by every command a block runs
SRC = str(Path(kernbench.__file__).resolve().parents[1])
OPTION = re.compile(r"(?<![\w./-])(--?[A-Za-z][\w-]*)")
#: modules a page's Python blocks imported from its folder (name -> folder), dropped from
#: ``sys.modules`` before another page's blocks run
IMPORTED: dict[str, str] = {}


class DocSession:
    """The blocks of one document, run in ``folder``; ``heavy`` runs heavy blocks too."""

    def __init__(self, root: Path, doc: str, folder: Path, heavy: bool = False) -> None:
        self.root, self.doc, self.folder, self.heavy = root, doc, folder, heavy
        self.blocks = parse((root / doc).read_text(encoding="utf-8"), doc)
        self.env = reader_env(SRC)
        self.env["PWD"] = str(folder)
        self.namespace: dict[str, object] = {"__name__": "__main__"}
        self.done: set[int] = set()
        _populate(root, folder)

    def selected(self, block: Block) -> bool:
        """Whether this session runs ``block`` (not skipped; heavy only when heavy)."""
        d = block.directive
        return d.skip is None and (self.heavy or not d.heavy)

    def run(self, block: Block) -> None:
        """Run ``block`` after every selected earlier block this session has not run."""
        for before in self.blocks:
            if before.line >= block.line:
                break
            if before.line not in self.done and self.selected(before):
                self._run_one(before)
        self._run_one(block)

    def _run_one(self, block: Block) -> None:
        self.done.add(block.line)  # a failed block is not re-run by the blocks after it
        RUNNERS[kind(block)](self, block)

    # the runners, by kind of block

    def _sh(self, block: Block) -> None:
        self.env = run_block(block.text, block.where, self.folder, self.env)

    def _python(self, block: Block) -> None:
        code = compile("\n" * block.line + block.text, str(self.root / block.path), "exec")
        with self.as_reader():
            exec(code, self.namespace)  # our own documentation, run as a reader runs it

    def _file(self, block: Block) -> None:
        name = block.directive.file or ""
        target = (self.folder / name).resolve()
        if not target.is_relative_to(self.folder.resolve()):
            raise DocBlockError(f"{block.where}: file {name!r} is outside the doc's folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text, encoding="utf-8")
        if block.lang == "toml":
            _toml(block)

    def _excerpt(self, block: Block) -> None:
        source = self.root / (block.directive.excerpt or "")
        if not source.is_file():
            raise DocBlockError(f"{block.where}: excerpt of {str(source)!r}, which is no file")
        missing = _subsequence(_code_lines(block.text), _code_lines(source.read_text()))
        if missing:
            raise DocBlockError(f"{block.where}: not in {block.directive.excerpt} (in this "
                                f"order): {missing!r}")

    def _synopsis(self, block: Block) -> None:
        from kernbench.cli import main

        for line in block.text.splitlines():
            words = line.split("#")[0].split()
            if words[:1] != ["kernbench"] or len(words) < 2:
                continue
            command = main.commands.get(words[1])
            if command is None:
                raise DocBlockError(f"{block.where}: `kernbench {words[1]}` is no command")
            known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
            unknown = [o for o in OPTION.findall(" ".join(words[2:]))
                       if o.split("=")[0] not in known | {"--help"}]
            if unknown:
                raise DocBlockError(f"{block.where}: `kernbench {words[1]}` has no option "
                                    f"{', '.join(unknown)}")

    def _shown(self, block: Block) -> None:
        if block.lang == "toml":
            _toml(block)

    def _skip(self, block: Block) -> None:
        return None

    @contextlib.contextmanager
    def as_reader(self) -> Iterator[None]:
        """In-process code runs in the doc's folder, with its modules first on the path and
        the environment the doc's shell blocks left (no ``KERNBENCH_*`` variable of the
        caller's)."""
        saved_env, saved_cwd, saved_path = dict(os.environ), os.getcwd(), list(sys.path)
        own = str(self.folder)
        for name, folder in list(IMPORTED.items()):  # README's mymod is not triton.md's
            if folder != own:
                sys.modules.pop(name, None)
                del IMPORTED[name]
        try:
            os.chdir(self.folder)
            os.environ.clear()  # the shell's, as the blocks before left it
            os.environ.update({k: v for k, v in self.env.items() if not k.startswith("KBDOC_")})
            sys.path.insert(0, own)
            yield
        finally:
            IMPORTED.update({name: own for name, module in list(sys.modules.items())
                             if (getattr(module, "__file__", None) or "").startswith(own)})
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            sys.path[:] = saved_path


def kind(block: Block) -> str:
    """The runner a block gets: its directive's word, else its language."""
    d = block.directive
    for word, on in (("skip", d.skip is not None), ("file", d.file), ("excerpt", d.excerpt),
                     ("synopsis", d.synopsis)):
        if on:
            return word
    return block.lang if block.lang in ("python", "sh") else "shown"


RUNNERS: dict[str, Callable[[DocSession, Block], None]] = {
    "sh": DocSession._sh, "python": DocSession._python, "file": DocSession._file,
    "excerpt": DocSession._excerpt, "synopsis": DocSession._synopsis,
    "shown": DocSession._shown, "skip": DocSession._skip,
}


def _populate(root: Path, folder: Path) -> None:
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    if (root / "examples").is_dir() and not (folder / "examples").exists():
        shutil.copytree(root / "examples", folder / "examples",
                        ignore=shutil.ignore_patterns("__pycache__"))
    if (root / "tests").is_dir() and not (folder / "tests").exists():
        (folder / "tests").symlink_to(root / "tests", target_is_directory=True)
    (folder / "docs" / "pictures").mkdir(parents=True, exist_ok=True)


def _toml(block: Block) -> None:
    try:
        tomllib.loads(block.text)
    except tomllib.TOMLDecodeError as exc:
        raise DocBlockError(f"{block.where}: not TOML: {exc}") from None


def _code_lines(text: str) -> list[str]:
    """Non-blank lines with their comments dropped, whitespace collapsed."""
    out = []
    for line in textwrap.dedent(text).splitlines():
        code = " ".join(line.split("  #")[0].split())
        if code and not code.startswith("#"):
            out.append(code)
    return out


def _subsequence(want: list[str], have: list[str]) -> list[str]:
    """The lines of ``want`` not found in ``have`` in order (empty: all found)."""
    at = 0
    for i, w in enumerate(want):
        try:
            at = have.index(w, at) + 1
        except ValueError:
            return want[i:]
    return []
