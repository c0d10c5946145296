"""MemoryStore: flat byte-addressed memory per (space, pe) with a per-byte valid map.

HBM regions come from ``tensors.parquet``; TCM and staging are sized from the recorded
hardware config. The set of spaces is the table ``SPACES``: a later space (``ipcq``) joins by
adding a row. Operands are resolved once per distinct (space, pe, addr, shape, dtype,
transposed) into an ``Operand`` that holds its byte range and a live numpy view; the per-op
check is then one ``bytearray.find`` over the valid map.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernbench.errors import ReplayError, TraceFormatError
from kernbench.replay.lazy import AllValid, LazyBytes, lazy_memory
from kernbench.schemas.dtypes import DTYPES
from kernbench.trace.ipcq_slots import directions_bytes

#: the numpy storage dtype of each trace dtype name (bfloat16: uint16 bits), looked up once
#: per distinct operand
NP_DTYPES: dict[str, np.dtype] = {name: d.storage for name, d in DTYPES.items()}


@dataclass(frozen=True)
class SpaceSpec:
    """One memory space: whether each PE has its own, and how big one instance is."""

    name: str
    per_pe: bool
    #: bytes of one instance from the recorded hw dict; None: sized by its regions (HBM)
    size: Callable[[Mapping[str, Any]], int] | None
    #: whether a read must check the valid map. HBM: every region byte is valid from the
    #: start and nothing rewinds it, so an in-region read cannot touch invalid bytes.
    check_reads: bool = True


def _kib(field: str) -> Callable[[Mapping[str, Any]], int]:
    def size(hw: Mapping[str, Any]) -> int:
        try:
            return int(hw[field]) * 1024
        except (KeyError, TypeError, ValueError):
            raise TraceFormatError(f"manifest hw has no usable {field!r}") from None

    return size


def _ipcq_size(hw: Mapping[str, Any]) -> int:
    """The two direction regions (``trace/ipcq_slots.py``; slots by PE index: ``ipcq_bytes``)."""
    return directions_bytes(int(hw.get("ipcq_depth", 2)), _kib("ipcq_slot_kib")(hw))


SPACES: dict[str, SpaceSpec] = {
    "hbm": SpaceSpec("hbm", per_pe=False, size=None, check_reads=False),
    "tcm": SpaceSpec("tcm", per_pe=True, size=_kib("kernel_scratch_kib")),
    "stage": SpaceSpec("stage", per_pe=True, size=_kib("stage_kib")),
    # the receiver's message slots: 2 directions x ipcq_depth slots of ipcq_slot_kib, more
    # on a PE that receives by PE index (``MemoryStore.ipcq_bytes``)
    "ipcq": SpaceSpec("ipcq", per_pe=True, size=_ipcq_size),
}


_ZEROS = memoryview(bytes(1 << 20))


def _zeros(n: int) -> memoryview | bytes:
    return _ZEROS[:n] if n <= len(_ZEROS) else bytes(n)


class Memory:
    """The bytes and the valid map of one (space, pe); ``regions`` are sorted (lo, hi, name)."""

    __slots__ = ("space", "pe", "size", "buf", "data", "valid", "regions", "_starts",
                 "check_reads", "mid", "pending", "bank", "base")

    def __init__(self, space: str, pe: int, size: int,
                 regions: list[tuple[int, int, str]], check_reads: bool = True,
                 mid: int = 0, bank: np.ndarray | None = None, base: int = 0,
                 valid: LazyBytes | None = None) -> None:
        self.space, self.pe, self.size = space, pe, size
        self.check_reads = check_reads
        self.mid = mid  # a small id, dense per store
        self.pending = 0  # writes into this memory waiting in the engine's heap
        # zeros from the allocator (calloc: pages the run never touches are never made) as a
        # writable byte buffer; ``bytearray(size)`` would write every byte once more.
        # ``bank``: the bytes of every PE's instance of the space end to end, this one at
        # ``base``, so equal operands of different PEs are one strided view (replay/batching)
        self.bank = np.zeros(size, np.uint8) if bank is None else bank
        self.base = base
        self.data = self.bank[base:base + size]
        self.buf = self.data.data  # its bytes as a writable memoryview
        # ``valid``: a map made page by page (replay/lazy.py), else all of it now
        self.valid: bytearray | AllValid | LazyBytes = (
            valid if valid is not None else bytearray(size) if check_reads else AllValid())
        self.regions = sorted(regions)
        self._starts = [r[0] for r in self.regions]

    def region_of(self, lo: int, hi: int) -> tuple[int, int, str] | None:
        """The region holding all of ``[lo, hi)``, or None."""
        k = bisect.bisect_right(self._starts, lo) - 1
        if k < 0:
            return None
        r = self.regions[k]
        return r if r[0] <= lo and hi <= r[1] else None

    def invalidate(self, lo: int, hi: int) -> None:
        lo, hi = max(lo, 0), min(hi, self.size)
        if hi > lo:
            self.valid[lo:hi] = _zeros(hi - lo)

    def first_invalid(self, lo: int, hi: int) -> int:
        return self.valid.find(0, lo, hi)


#: the view, dtype and marks of an operand not (yet) placed: empty, so a write through them
#: fails (an op using an unplaced operand fails when replay reaches it, from ``error``)
UNPLACED: np.ndarray = np.empty(0, np.uint8)
_BYTES = np.dtype(np.uint8)


class Operand:
    """A resolved operand: its bytes ``[lo, hi)`` in ``mem`` and a live view of them.

    ``view`` has the operand's value layout (a transposed operand is the ``.T`` of the
    row-major bytes); it is ``UNPLACED`` until the store places it. ``error`` is set instead
    when the operand cannot be placed; ops using it fail when replay reaches them.
    """

    __slots__ = ("space", "pe", "addr", "shape", "dtype", "transposed", "lo", "hi", "nbytes",
                 "mem", "valid", "view", "ones", "npd", "error")

    def __init__(self, space: str, pe: int, addr: int, shape: tuple[int, ...], dtype: str,
                 transposed: bool) -> None:
        self.space, self.pe, self.addr, self.shape = space, pe, addr, shape
        self.dtype, self.transposed = dtype, transposed
        self.lo = addr
        self.nbytes = 0
        self.hi = addr
        self.mem: Memory | None = None
        self.valid: bytearray | AllValid | LazyBytes = bytearray(1)  # a failing op never reads it
        self.view: np.ndarray = UNPLACED
        self.ones: memoryview = memoryview(b"")  # nbytes of 0x01, set by the engine
        self.npd: np.dtype = _BYTES  # the value dtype, once placed
        self.error: str | None = None

    def describe(self) -> str:
        t = " transposed" if self.transposed else ""
        return (f"{self.space}@pe{self.pe} [{self.lo}, {self.hi}) {list(self.shape)} "
                f"{self.dtype}{t}")


class MemoryStore:
    """Every (space, pe) memory of one replay. Memories are made on first use."""

    def __init__(self, hw: Mapping[str, Any], hbm_regions: list[tuple[int, int, str]],
                 spaces: Mapping[str, SpaceSpec] = SPACES,
                 ipcq_bytes: Mapping[int, int] | None = None) -> None:
        self.hw = hw
        #: pe -> the ipcq bytes its messages span (the validator's ``ipcq_bytes``): a space
        #: larger than the hw's is made page by page as touched (replay/lazy.py)
        self.ipcq_bytes = dict(ipcq_bytes or {})
        self.spaces = dict(spaces)
        try:
            self.n_pe = int(hw["n_pe"])
        except (KeyError, TypeError, ValueError):
            raise TraceFormatError("manifest hw has no usable 'n_pe'") from None
        self.hbm_regions = list(hbm_regions)
        self.memories: dict[tuple[str, int], Memory] = {}
        self._banks: dict[str, np.ndarray] = {}
        self._operands: dict[tuple, Operand] = {}
        #: element operands of indexed rows, shared by rows of equal operand and elements
        #: (``memory_binders``); dropped with the operands
        self.elements: dict[tuple, Any] = {}

    # -- memories --------------------------------------------------------------------
    def memory(self, space: str, pe: int) -> Memory:
        """The memory of (space, pe); KeyError/ValueError with a message when there is none."""
        key = (space, pe)
        mem = self.memories.get(key)
        if mem is not None:
            return mem
        spec = self.spaces.get(space)
        if spec is None:
            raise KeyError(f"unknown memory space {space!r} (known: {', '.join(self.spaces)})")
        if spec.per_pe and not 0 <= pe < self.n_pe:
            raise ValueError(f"{space} of pe {pe} does not exist (n_pe = {self.n_pe})")
        if not spec.per_pe and pe != 0:
            raise ValueError(f"{space} is one shared space (pe 0), not pe {pe}")
        bank, valid = None, None
        if spec.size is None:
            regions = self.hbm_regions
            size = max((hi for _, hi, _ in regions), default=0)
        else:
            size = spec.size(self.hw)
            if space == "ipcq" and self.ipcq_bytes.get(pe, 0) > size:  # slots by PE index
                size = self.ipcq_bytes[pe]
                bank, valid = lazy_memory(size)
            elif spec.per_pe:  # calloc'd: the pages of PEs never used are never made
                bank = self._banks.get(space)
                if bank is None:
                    bank = self._banks[space] = np.zeros(size * self.n_pe, np.uint8)
            regions = [(0, size, space)]
        mem = self.memories[key] = Memory(space, pe, size, regions, spec.check_reads,
                                          len(self.memories), bank,
                                          pe * size if valid is None and spec.per_pe else 0,
                                          valid)
        return mem

    def fill(self, space: str, pe: int, addr: int, data: bytes | memoryview) -> None:
        """Write initial bytes (valid from the start)."""
        mem = self.memory(space, pe)
        n = len(data)
        mem.buf[addr:addr + n] = data
        if mem.check_reads:
            mem.valid[addr:addr + n] = b"\x01" * n

    def read_bytes(self, space: str, pe: int, lo: int, hi: int) -> bytes:
        return bytes(self.memory(space, pe).buf[lo:hi])

    # -- operands --------------------------------------------------------------------
    def operand(self, space: str, pe: int, addr: int, shape: tuple[int, ...], dtype: str,
                transposed: bool) -> Operand:
        """The resolved operand for these fields (cached; never raises)."""
        key = (space, pe, addr, shape, dtype, transposed)
        op = self._operands.get(key)
        if op is None:
            op = self._operands[key] = self._resolve(Operand(*key))
        return op

    def _resolve(self, o: Operand) -> Operand:
        npd = NP_DTYPES.get(o.dtype)
        if npd is None:
            o.error = f"unknown dtype {o.dtype!r}"
            return o
        count = 1
        for s in o.shape:
            count *= s
        if count <= 0 or any(s <= 0 for s in o.shape):
            o.error = f"shape {list(o.shape)} is empty or negative"
            return o
        o.npd = npd
        o.nbytes = count * npd.itemsize
        o.hi = o.lo + o.nbytes
        try:
            mem = self.memory(o.space, o.pe)
        except (KeyError, ValueError) as exc:
            o.error = str(exc.args[0])
            return o
        if mem.region_of(o.lo, o.hi) is None:
            o.error = (f"bytes [{o.lo}, {o.hi}) are not inside one region of {o.space}@pe{o.pe} "
                       f"({_regions_text(mem)})")
            return o
        # the live view in one call (a region holds it: it fits in the buffer)
        o.view = (np.ndarray(o.shape[::-1], npd, buffer=mem.buf, offset=o.lo).T
                  if o.transposed else np.ndarray(o.shape, npd, buffer=mem.buf, offset=o.lo))
        o.mem, o.valid = mem, mem.valid
        return o

    @property
    def n_operands(self) -> int:
        return len(self._operands)

    def forget_operands(self) -> None:
        """Drop the operand cache (operands in use stay valid; new ones are resolved again)."""
        self._operands.clear()
        self.elements.clear()


def _regions_text(mem: Memory, limit: int = 4) -> str:
    near = [f"{n} [{lo}, {hi})" for lo, hi, n in mem.regions[:limit]]
    more = f", ... {len(mem.regions) - limit} more" if len(mem.regions) > limit else ""
    return ", ".join(near) + more if near else "no regions"


def check_read(o: Operand, where: str, index: int) -> np.ndarray:
    """The view of input ``index`` of the op ``where``, or a ReplayError naming the bytes.

    The engine inlines the common case (one ``find`` on the valid map) and calls this to
    build the message; tests call it directly.
    """
    if o.error is not None:
        raise ReplayError(f"{where}: input {index} {o.describe()}: {o.error}")
    bad = o.valid.find(0, o.lo, o.hi)
    if bad >= 0:
        raise ReplayError(f"{where}: input {index} {o.describe()}: read of invalid bytes "
                          f"(first invalid byte at {bad}, {_invalid_count(o)} of {o.nbytes} "
                          "invalid)")
    return o.view


def _invalid_count(o: Operand) -> int:
    return o.hi - o.lo - sum(o.valid[o.lo:o.hi])
