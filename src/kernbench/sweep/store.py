"""The sweep directory (docs/sweeps.md):

```
SWEEP/
  sweep.toml                  the spec as run (canonical form)
  rules.toml                  the check rules, when the spec has some
  points/<point_id>.ktrace/   one trace per finished point, with point.json (its row);
                              a workload's point is points/<point_id>.workload/ (ADR-0930)
  points.parquet              one row per point, rewritten atomically as points finish
```

A point is finished when every trace in its folder verifies against its manifest (sha256 of
every data file) and its ``point.json`` names it and the hash of the file that seals it (a
trace's manifest, a workload's ``workload.json``). Anything else under
``points/`` (a staging folder, a half-written trace) is never trusted and is removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kernbench.errors import BadInputError, KernbenchError, TraceFormatError
from kernbench.sweep.kinds import KERNEL, KINDS
from kernbench.sweep.task import POINT_FILE, POINT_FORMAT
from kernbench.trace import file_sha256, read_manifest, verify_files

SPEC_FILE = "sweep.toml"
RULES_FILE = "rules.toml"
POINTS_DIR = "points"
POINTS_FILE = "points.parquet"
LOCK_FILE = ".lock"
STAGE_PREFIX = ".stage-"


def is_sweep(path: str | Path) -> bool:
    """Whether ``path`` is a sweep directory (it holds ``sweep.toml``)."""
    return (Path(path) / SPEC_FILE).is_file()


def trace_dir(root: Path, point_id: str, kind: str = KERNEL) -> Path:
    """The folder of a point: its trace, or (a workload's) its run's folder."""
    return root / POINTS_DIR / f"{point_id}{KINDS[kind].suffix}"


def verify_point(path: Path) -> None:
    """Every trace in a point's folder against its manifest (KernbenchError otherwise)."""
    manifests = sorted(path.rglob("manifest.json"))
    if not manifests:
        raise TraceFormatError(f"{path}: no trace")
    for manifest in manifests:
        verify_files(manifest.parent, read_manifest(manifest.parent))


@contextlib.contextmanager
def open_sweep(root: Path, spec_text: str, rules_text: str | None) -> Iterator[Path]:
    """Create or reopen the sweep at ``root`` under an exclusive lock; yield a clean staging
    folder. Refuses a folder that is not this sweep."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise BadInputError(f"sweep output {str(root)!r} exists and is not a directory")
    if root.is_dir() and any(root.iterdir()) and not is_sweep(root):
        raise BadInputError(f"sweep output {str(root)!r} exists and is not a sweep; "
                            "not writing into it")
    rules_now = (root / RULES_FILE).read_text() if (root / RULES_FILE).is_file() else None
    if is_sweep(root) and ((root / SPEC_FILE).read_text() != spec_text
                           or (rules_text is not None and rules_now != rules_text)):
        raise BadInputError(f"sweep {str(root)!r} was run with a different spec (see its "
                            f"{SPEC_FILE}); choose another -o to run this one")
    try:
        (root / POINTS_DIR).mkdir(parents=True, exist_ok=True)
        lock = open(root / LOCK_FILE, "a+")  # noqa: SIM115 - held for the whole run
    except OSError as exc:
        raise BadInputError(f"cannot write the sweep to {str(root)!r}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise BadInputError(f"another kernbench sweep is running on {str(root)!r}") from None
        for leftover in (root / POINTS_DIR).glob(f"{STAGE_PREFIX}*"):
            shutil.rmtree(leftover, ignore_errors=True)
        if rules_text is not None:
            write_atomic(root / RULES_FILE, rules_text.encode())
        if not is_sweep(root):
            write_atomic(root / SPEC_FILE, spec_text.encode())
        stage = root / POINTS_DIR / f"{STAGE_PREFIX}{os.getpid()}"
        stage.mkdir()
        yield stage
        shutil.rmtree(stage, ignore_errors=True)
    finally:
        lock.close()


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary sibling, fsync it, and rename it over ``path``."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def finished_row(root: Path, point_id: str, kind: str = KERNEL) -> dict[str, Any] | None:
    """The stored row of a finished point, or None (then any leftover is removed)."""
    path = trace_dir(root, point_id, kind)
    if not path.exists():
        return None
    seal = KINDS[kind]
    try:
        body = json.loads((path / POINT_FILE).read_text())
        verify_point(path)
        trusted = (isinstance(body, dict) and body.get("format") == POINT_FORMAT
                   and body.get("point_id") == point_id
                   and body.get(seal.seal_key) == file_sha256(path / seal.seal)
                   and isinstance(body.get("row"), dict) and body["row"].get("status") == "ok")
    except (OSError, ValueError, KernbenchError):
        trusted = False
    if not trusted:
        shutil.rmtree(path, ignore_errors=True)
        return None
    return body["row"]


def place(staged: Path, root: Path, point_id: str, kind: str = KERNEL) -> None:
    """Move a complete staged point into ``points/`` (one rename: atomic)."""
    final = trace_dir(root, point_id, kind)
    if final.exists():  # a finished copy (e.g. from an orphaned worker) wins; drop ours
        shutil.rmtree(staged, ignore_errors=True)
        return
    os.rename(staged, final)


def write_files(files: dict[str, bytes], stage: Path, root: Path, point_id: str,
                kind: str = KERNEL) -> None:
    """Write a point's files (returned by a remote task) and move them into place."""
    tmp = stage / f"{point_id}.driver{KINDS[kind].suffix}"
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, data in files.items():
        target = (tmp / rel).resolve()
        if tmp.resolve() not in target.parents:
            raise BadInputError(f"point {point_id}: refusing file path {rel!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    place(tmp, root, point_id, kind)
