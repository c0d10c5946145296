"""Atomic directory replacement: a trace (or ``replay/``) appears whole or not at all.

``atomic_dir(out)`` yields a hidden temporary sibling ``.NAME.tmp-PID-XXXX``; when the body
succeeds it takes an exclusive lock on ``out`` (``flock`` of the sibling ``.NAME.lock``),
recovers what dead processes left behind, and swaps the new directory in:

- ``out`` absent: one ``rename``.
- ``out`` present: one atomic exchange (Linux ``renameat2(RENAME_EXCHANGE)``), so ``out`` is
  at every instant the old directory or the new one; the old one, now under the temporary
  name, is then deleted. Where the exchange is unavailable, two renames via
  ``.NAME.old-PID-XXXX``; a kill between them leaves ``out`` missing until the next
  ``atomic_dir`` on it restores the old directory.

Recovery (under the lock, before the body and again before the swap, only for names whose
PID is no longer alive): if ``out`` is missing, the newest ``.NAME.old-*`` is renamed back
to ``out``; every other ``.NAME.tmp-*`` and ``.NAME.old-*`` is deleted. Concurrent writers
of one ``out`` each finish (the lock serialises the swaps; the last swap wins) and each
reports only what it wrote. Every OS error is a one-line ``BadInputError``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import re
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from kernbench.errors import BadInputError

_AT_FDCWD = -100
#: flock errors meaning "this filesystem cannot lock" (the write then goes on unlocked)
_NO_LOCKING = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS})
_RENAME_EXCHANGE = 2


def _is_trace(path: Path) -> bool:
    return (path / "manifest.json").is_file()


def _fail(what: str, path: Path | str, exc: OSError) -> BadInputError:
    return BadInputError(f"cannot {what} {str(path)!r}: {exc.strerror or exc}")


def _libc_renameat2() -> Callable[..., int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _libc_renameat2()


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths; False if this system or filesystem cannot."""
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one we may not signal counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _rmtree(path: Path) -> None:
    """Delete a directory tree, making read-only parts writable first; best effort."""
    def retry(func: Callable[..., object], p: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p) or ".", 0o700)
            os.chmod(p, 0o700)
            func(p)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:  # pragma: no cover - Python 3.11
        shutil.rmtree(path, onerror=retry)


def _sibling(out: Path, kind: str) -> Path:
    """A fresh name ``.NAME.KIND-PID-RANDOM`` beside ``out`` (not created)."""
    while True:
        path = out.parent / f".{out.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}"
        if not os.path.lexists(path):
            return path


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """Hold the exclusive lock of ``out`` (waits for another holder to finish). The lock
    file is removed on release; a waiter that then locks a removed file tries again."""
    lock = out.parent / f".{out.name}.lock"
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _fail("lock", out, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_ino == os.stat(lock).st_ino:
                break
        except FileNotFoundError:
            pass  # the previous holder removed it: lock the new one
        except OSError as exc:
            if exc.errno in _NO_LOCKING:  # a filesystem without flock: go on unlocked
                break
            os.close(fd)
            raise _fail("lock", out, exc) from None
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)


_LEFTOVER = re.compile(r"\.(tmp|old)-(\d+)(?:-[^/]*)?$")


def leftovers(out: Path) -> list[tuple[str, int, Path]]:
    """``(kind, pid, path)`` of every ``.NAME.tmp-*`` / ``.NAME.old-*`` beside ``out``."""
    prefix = f".{out.name}."
    found = []
    try:
        names = os.listdir(out.parent)
    except OSError:
        return []
    for name in names:
        if name.startswith(prefix) and (m := _LEFTOVER.fullmatch(name[len(prefix) - 1:])):
            found.append((m.group(1), int(m.group(2)), out.parent / name))
    return sorted(found, key=lambda f: str(f[2]))


def recover(out: Path) -> None:
    """Restore or delete what dead writers of ``out`` left (call with the lock held)."""
    dead = [f for f in leftovers(out) if f[1] != os.getpid() and not pid_alive(f[1])]
    olds = [f[2] for f in dead if f[0] == "old"]
    if olds and not os.path.lexists(out):  # killed between the two renames: put it back
        newest = max(olds, key=lambda p: p.stat().st_mtime_ns)
        try:
            os.rename(newest, out)
        except OSError as exc:
            raise _fail("restore the interrupted trace into", out, exc) from None
    for _, _, path in dead:
        if os.path.lexists(path):
            _rmtree(path)


def _check_target(out: Path, replaceable: Callable[[Path], bool]) -> None:
    if out.is_symlink():
        raise BadInputError(f"output {str(out)!r} is a symlink; not replacing it")
    if out.exists() and not replaceable(out):
        raise BadInputError(f"output {str(out)!r} exists and is not a trace; not overwriting")


def _swap(tmp: Path, out: Path) -> None:
    """Put ``tmp`` at ``out`` (replacing what is there) with the lock held."""
    if not os.path.lexists(out):
        os.rename(tmp, out)
        return
    if _exchange(tmp, out):
        _rmtree(tmp)  # (now the old directory)
        return
    old = _sibling(out, "old")
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(old, out)
        raise
    _rmtree(old)


def outside_traces(out: Path) -> None:
    """A trace never goes inside another trace (that would change the outer one)."""
    try:
        where = Path(os.path.abspath(out))
    except OSError:  # no current directory: atomic_dir says so in one line
        return
    for folder in where.parents:
        if (folder / "manifest.json").is_file():
            raise BadInputError(f"output {str(out)!r} is inside the trace {str(folder)!r}; "
                                "write it beside that trace instead")


@contextlib.contextmanager
def atomic_dir(out: str | Path, replaceable: Callable[[Path], bool] = _is_trace
               ) -> Iterator[Path]:
    """Yield a temporary sibling of ``out``; put it at ``out`` only if the body succeeds.

    An existing ``out`` is replaced if ``replaceable(out)`` (by default: it is a trace);
    any other existing path, a symlink, the current directory or one of its parents is
    refused. See the module docstring for locking and recovery.
    """
    try:
        cwd = os.getcwd()
    except OSError as exc:
        raise _fail("resolve", out, exc) from None
    out = Path(os.path.normpath(os.path.join(cwd, out)))
    if os.path.commonpath([cwd, str(out)]) == str(out):
        raise BadInputError(f"output {str(out)!r} is the current directory or contains it; "
                            "name a new directory (e.g. -o run.ktrace)")
    _check_target(out, replaceable)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _fail("create output folder", out.parent, exc) from None
    with locked(out):  # a failing body must not leave an interrupted trace hidden
        recover(out)
    tmp = _sibling(out, "tmp")
    try:
        tmp.mkdir()
    except OSError as exc:
        raise _fail("write to", out.parent, exc) from None
    try:
        try:
            yield tmp
        except OSError as exc:
            raise _fail("write", out, exc) from None
        with locked(out):
            recover(out)
            _check_target(out, replaceable)
            try:
                _swap(tmp, out)
            except OSError as exc:
                raise _fail("replace", out, exc) from None
    finally:
        if os.path.lexists(tmp):
            _rmtree(tmp)
