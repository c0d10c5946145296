"""The error hierarchy. Messages quote the offending value; only the CLI maps them to exits."""

from __future__ import annotations

from collections.abc import Iterable


class KernbenchError(Exception):
    """Base of every error kernbench raises on purpose."""


class BadInputError(KernbenchError):
    """A user-supplied value (case name, parameter, path, preset) is unusable."""


class RetimeError(BadInputError):
    """``retime`` cannot time a trace's op stream on the hardware asked for: the stream
    depends on that hardware (a program no longer fits its slot, a field the case read, a
    guard whose value depended on time), or the trace lacks its stream."""


class KernelError(KernbenchError):
    """A kernel-author mistake, raised at emit time and naming the kernel's file:line."""

    def __init__(self, message: str, src: str | None = None) -> None:
        self.src = src
        super().__init__(f"{src}: {message}" if src else message)


class ShapeError(KernelError):
    """Operand shapes do not fit the op (dot, elementwise, reshape, broadcast, copy_to)."""


class DtypeError(KernelError):
    """Operand dtypes do not fit the op."""


class BoundsError(KernelError):
    """A load or store reaches outside its tensor's HBM extent."""


class ScratchOverflowError(KernelError):
    """Kernel scratch exhausted: requested bytes, cursor, budget and allocation site."""


class ScratchScopeError(KernelError):
    """A handle was used after the scratch_scope it was allocated in exited."""


class IpcqError(KernelError):
    """An IPCQ call names an unknown direction or does not fit the ring."""


class UnsupportedError(KernelError, AttributeError):
    """A Triton name kernbench's front end does not implement (an AttributeError too, so
    that ``hasattr(tl, name)`` stays false)."""


class RecordLimitError(KernelError):
    """A launch would record more ops than ``KERNBENCH_MAX_OPS`` allows, or run more
    programs than ``KERNBENCH_MAX_PROGRAMS`` (record/lowering/bounds.py)."""


class TraceFormatError(KernbenchError):
    """A trace file is missing, corrupt, or of an unsupported schema version."""


class ReplayError(KernbenchError):
    """Phase 2 found an op reading bytes it must not (out of region, wrong size, invalid)."""


class PathDivergence(ReplayError):
    """Phase 2 computes another value for a guard than the one its path was recorded on
    (ADR-0840): ``recorded`` and ``computed`` are the two values as text; replay names the
    guard's kernel line and program around them."""

    def __init__(self, recorded: str, computed: str) -> None:
        super().__init__(f"recorded {recorded}, replay computes {computed}")
        self.recorded, self.computed = recorded, computed


class SpaceError(KernelError):
    """An operand lives in the wrong memory space (copy_to, load out=)."""


class DocBlockError(KernbenchError, AssertionError):
    """A documented block did not do what its page says: a command failed, or printed other
    figures than the page shows (``kernbench.docs``; an AssertionError for the doc tests)."""


def closest_name(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (difflib), or None when none is close."""
    import difflib  # only on an error: every process imports this module

    match = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    return match[0] if match else None


def closest(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest known name (difflib), else ``""``."""
    match = closest_name(name, known)
    return f"; did you mean {match!r}?" if match else ""
