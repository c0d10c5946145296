"""Run an ``sh`` block of the documentation command by command and check what it printed.

A comment line right under a command (no blank line between) is a line the command prints::

    kernbench record tests.triton.kernels.matmul:case $P -o mm.ktrace
    # recorded tests.triton.kernels.matmul:case: 416 ops, latency 5.566 us -> mm.ktrace

Each such line must match one line of the command's output (stdout and stderr together),
in order, after runs of spaces are collapsed; ``...`` stands for any text. A comment after a
blank line, or at the end of a command line, is prose. Every command must exit 0.

The block runs in one ``bash`` (``set -a``: every assignment is exported, so ``P=...`` in
one block is seen by the next) in the document's folder; ``KERNBENCH_*`` variables of the
caller are dropped (a reader has none set), and the ``kernbench`` package under test stays
importable even after a block sets ``PYTHONPATH`` (``export PYTHONPATH=examples``).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kernbench.errors import DocBlockError

MARK = "@@kbdoc"
ENV_FILE = ".kbdoc-env"  # the block's environment at its end, for the next block


@dataclass(frozen=True)
class Command:
    line: int  # 0-based line of the command inside the block
    text: str  # continuation lines joined
    expected: tuple[str, ...]  # the lines it must print, in order


def commands(block: str) -> list[Command]:
    """The commands of a block, each with the output lines written under it."""
    out: list[Command] = []
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        start, text = i, lines[i]
        while text.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        expected = []
        while i < len(lines) and lines[i].lstrip().startswith("#"):
            expected.append(lines[i].lstrip()[1:].strip())
            i += 1
        out.append(Command(start, text, tuple(expected)))
    return out


def _normal(line: str) -> str:
    return " ".join(line.split())


def line_pattern(expected: str) -> re.Pattern[str]:
    """An expected line as a pattern over one normalised output line (``...``: any text)."""
    return re.compile(".*".join(re.escape(p) for p in _normal(expected).split("...")))


def missing_lines(expected: tuple[str, ...], output: str) -> list[str]:
    """The expected lines not found, in order, among the output's lines."""
    lines = [_normal(x) for x in output.splitlines()]
    at, missing = 0, []
    for want in expected:
        pat = line_pattern(want)
        hit = next((j for j in range(at, len(lines)) if pat.fullmatch(lines[j])), None)
        if hit is None:
            missing.append(want)
        else:
            at = hit + 1
    return missing


def _script(cmds: list[Command]) -> str:
    parts = ["set -a", "exec 2>&1",
             # the package under test stays importable whatever PYTHONPATH a block sets
             'trap \'case ":$PYTHONPATH:" in *":$KBDOC_SRC:"*) ;; *) '
             'PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$KBDOC_SRC";; esac\' DEBUG']
    for n, c in enumerate(cmds):
        parts += [f"printf '\\n{MARK} {n}@@\\n'", c.text, "__kbdoc_rc=$?",
                  f"printf '\\n{MARK} {n} end %s@@\\n' \"$__kbdoc_rc\"",
                  '[ "$__kbdoc_rc" -eq 0 ] || exit "$__kbdoc_rc"']
    parts.append(f'trap - DEBUG; env -0 > "$KBDOC_HOME/{ENV_FILE}"')
    return "\n".join(parts) + "\n"


def _split(output: str, n: int) -> list[tuple[str, int | None]]:
    """Per command: its output and exit code (None: it never ran or never ended)."""
    res: list[tuple[str, int | None]] = []
    for k in range(n):
        m = re.search(rf"{MARK} {k}@@\n(.*?)\n{MARK} {k} end (\d+)@@", output, re.S)
        if m:
            res.append((m.group(1), int(m.group(2))))
        else:
            begun = re.search(rf"{MARK} {k}@@\n(.*)", output, re.S)
            res.append((begun.group(1) if begun else "", None))
    return res


def run_block(text: str, where: str, folder: Path, env: dict[str, str],
              timeout: float = 3600) -> dict[str, str]:
    """Run the block's commands in ``folder`` with ``env``; raise ``DocBlockError`` on the
    first command that fails or misses a line; return the environment at the block's end."""
    cmds = commands(text)
    if not cmds:
        return env
    run_env = {**env, "KBDOC_HOME": str(folder)}
    cwd = env.get("PWD", str(folder))
    try:
        proc = subprocess.run(["bash", "-c", _script(cmds)], cwd=cwd, env=run_env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise DocBlockError(f"{where}: the block ran over {timeout:.0f} s") from None
    for c, (output, rc) in zip(cmds, _split(proc.stdout, len(cmds)), strict=True):
        if rc is None:
            raise DocBlockError(f"{where}: `{c.text}` did not finish (bash exit "
                                f"{proc.returncode}):\n{output}{proc.stderr}")
        if rc != 0:
            raise DocBlockError(f"{where}: `{c.text}` exited {rc}:\n{output}")
        missing = missing_lines(c.expected, output)
        if missing:
            raise DocBlockError(f"{where}: `{c.text}` did not print the line(s) the page "
                                f"shows:\n  " + "\n  ".join(missing)
                                + f"\nit printed:\n{output}")
    return _read_env(folder / ENV_FILE, env)


def _read_env(path: Path, fallback: dict[str, str]) -> dict[str, str]:
    try:
        raw = path.read_bytes()
    except OSError:
        return fallback
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(): v.decode(errors="replace") for k, v in pairs
            if not k.startswith((b"BASH_FUNC_", b"__kbdoc")) and k not in (b"_", b"KBDOC_HOME")}


def reader_env(src: str) -> dict[str, str]:
    """The environment a reader runs the docs in: the caller's, less kernbench's and pytest's
    own variables, plus ``KBDOC_SRC`` (the folder holding the package under test)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KERNBENCH_", "PYTEST_", "KBDOC_"))}
    env["KBDOC_SRC"] = src
    return env
