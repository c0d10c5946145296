"""The value graph of a recording with guards (ADR-0840): what each recorded op computes,
kept lazily so a decision can evaluate its cone and nothing else.

Every op row the PE machine logs passes ``Shadow.note`` (one call in ``PE.row``) while a
recording runs in guard mode. TCM (and staging, IPCQ-slot) bytes are values of the program
that wrote them: each ``Buffer`` carries ``val``, the ``Node`` of the op that last wrote
it, and a node holds ``Ref`` s to the nodes its inputs held when it was issued. Within a
program this is exact: the scoreboard makes every read see the last earlier write in
program order (the race detector checks it), so program order is time order for TCM.
HBM is shared and its contents change in recorded time order: a read of HBM is a node
with a ``key`` (its place in that order) and every write or atomic of HBM an ``Effect`` of
the tensor it touches (``hbm.Hbm``), applied in key order when a read needs it.

Nothing is computed here: ``evaluate.Evaluator`` computes a node's value when a guard asks.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from kernbench.record.commands import Cmd
from kernbench.record.guards.hbm import Access, Effect, Hbm
from kernbench.record.handle import Buffer, TensorHandle
from kernbench.schemas import elements as ix
from kernbench.schemas.elements import AccessTable
from kernbench.schemas.ops import ATOMICS, OP, OPS, Family, Op


class NeedsGuards(BaseException):  # noqa: N818 - a control-flow signal of the recorder
    """A kernel reached a decision on data in a recording that keeps no value graph: the
    recorder records the launch again with one (``record/recorder.py``). A BaseException,
    as ``GeneratorExit``: no ``except Exception`` of a front end or a kernel swallows it."""


#: a place in recorded time order: (time, phase, op_id); an HBM write lands at phase 0 of
#: its end, an op runs (reads HBM; an atomic reads and writes it) at phase 1 of its start:
#: replay's order (writes land before reads at equal times, then op_id)
Key = tuple[int, int, int]
LAND, RUN = 0, 1
#: the key of an effect noted at issue, not yet on its tensor (``Late.land`` gives its own)
PENDING: Key = (-1, RUN, -1)


class Ref:
    """One input as the op read it: the node its bytes held, viewed as ``shape``/``dtype``
    (``transposed``: the bytes hold the reversed shape, as ``tl.trans`` views them)."""

    __slots__ = ("node", "shape", "dtype", "transposed")

    def __init__(self, node: Node | None, h: TensorHandle) -> None:
        self.node, self.shape, self.dtype = node, tuple(h.shape), h.dtype.name
        self.transposed = h.transposed


class Node:
    """What one op computes into TCM: ``op`` of ``ins`` under ``attrs``, of ``shape`` and
    ``dtype`` (the output handle's). ``key``: its place in time order when it reads HBM
    (``access`` then says which elements). ``value`` (storage) once evaluated."""

    __slots__ = ("op", "attrs", "ins", "shape", "dtype", "key", "access", "value", "why",
                 "pieces")

    def __init__(self, op: Op, attrs: dict[str, Any], ins: tuple[Ref, ...],
                 shape: tuple[int, ...], dtype: str, key: Key | None = None,
                 access: Access | None = None, why: str | None = None) -> None:
        self.op, self.attrs, self.ins, self.shape, self.dtype = op, attrs, ins, shape, dtype
        self.key, self.access, self.why = key, access, why
        self.value: np.ndarray | None = None
        #: a composite GEMM's result: (byte offset, node) of the blocks its children wrote
        self.pieces: list[tuple[int, Node]] | None = None


def opaque(why: str, h: TensorHandle) -> Node:
    """A value the evaluator cannot compute (``why`` says what it is)."""
    return Node(OP.COPY, {}, (), tuple(h.shape), h.dtype.name, why=why)


def _attrs(text: str) -> dict[str, Any]:
    """The attrs object of a command (parsed once per distinct text; never written)."""
    got = _ATTRS.get(text)
    if got is None:
        if len(_ATTRS) >= 4096:
            _ATTRS.clear()
        got = _ATTRS[text] = {} if text == "{}" else json.loads(text)
    return got


_ATTRS: dict[str, dict[str, Any]] = {}


class Shadow:
    """The value graph of one recording: nodes on buffers, effects on HBM tensors."""

    __slots__ = ("hbm", "access", "assembling", "n_notes")

    def __init__(self, hbm: Hbm, access: AccessTable) -> None:
        self.hbm = hbm
        self.access = access  # the arrays of access.parquet, kept while recording
        self.assembling: tuple[Buffer, Node] | None = None  # a composite being written
        self.n_notes = 0

    # -- the one hook: PE.row (closed form), or the chip's issue and decision ----------
    def note(self, cmd: Cmd, t_start: int, t_end: int, op_id: int, child: bool) -> None:
        """One logged row (``child``: a composite's), its times known."""
        late = self.issue(cmd, op_id, child)
        if late is not None:
            late.land(t_start, t_end)

    def issue(self, cmd: Cmd, op_id: int, child: bool) -> Late | None:
        """One op as its program issues it (``child``: a composite's): its node on the
        buffer it writes, reading what its inputs hold now (program order). An op of HBM
        still needs its place in time order: the ``Late`` returned, to ``land`` once its
        times are decided (the chip decides them after issue)."""
        self.n_notes += 1
        op = cmd.op
        if not child:
            self.assembling = None
        family = OPS[op].family
        if family in (Family.SCOPE, Family.GUARD):
            return None
        out = cmd.out
        if op is OP.GEMM:  # the children write its blocks (trans_b) or the whole (k-split)
            assert out is not None, "a composite GEMM writes a result"
            node = Node(OP.GEMM, {}, (), tuple(out.shape), out.dtype.name)
            node.pieces = []
            out.buf.val = node
            self.assembling = (out.buf, node)
            return None
        if op is OP.DMA_WRITE or op is OP.SCATTER or op in ATOMICS:
            return self._effect(cmd, op_id)
        if out is None:
            return None
        node = self._node(cmd)
        buf = out.buf
        asm = self.assembling
        if child and asm is not None and buf is not asm[0] and buf.space == asm[0].space \
                and asm[0].addr <= buf.addr < asm[0].addr + asm[0].nbytes:
            pieces = asm[1].pieces
            assert pieces is not None, "a composite's node collects its blocks"
            pieces.append((buf.addr - asm[0].addr, node))
        else:
            buf.val = node
        return None if node.access is None else Late(node, None, op_id)

    # -- nodes -------------------------------------------------------------------------
    def _node(self, cmd: Cmd) -> Node:
        op, out = cmd.op, cmd.out
        assert out is not None
        attrs = _attrs(cmd.attrs)
        shape, dtype = tuple(out.shape), out.dtype.name
        family = OPS[op].family
        tcm = tuple(Ref(h.buf.val, h) for h in cmd.inputs if h.buf.space != "hbm")
        if op is OP.DMA_READ:
            src = cmd.inputs[0]
            if src.buf.space != "hbm":
                return Node(OP.COPY, {}, tcm, shape, dtype)  # a TCM -> TCM copy by DMA
            return Node(op, attrs, (), shape, dtype, None, self._static(src, attrs, shape))
        if family is Family.GATHER:
            t = self.hbm.at(cmd.inputs[0].buf.addr)
            roles = {"offsets": tcm[0], **({"mask": tcm[1]} if len(tcm) > 1 else {})}
            return Node(op, attrs, tcm, shape, dtype, None,
                        Access(t, None, None, self._mask(attrs, shape), roles, shape))
        if family is Family.ATOMIC:
            return Node(op, attrs, tcm, shape, dtype, None, self._atomic_access(cmd, attrs, shape))
        if family is Family.CONST:
            node = Node(op, attrs, (), shape, dtype)
            node.value = self.access.get(attrs["values"], "values", shape)
            return node
        if family is Family.IPCQ:  # send into the receiver's slot, recv out of it: a copy
            return Node(OP.COPY, {}, tcm, shape, dtype)
        return Node(op, attrs, tcm, shape, dtype)

    # -- HBM -----------------------------------------------------------------------------
    def _static(self, h: TensorHandle, attrs: dict[str, Any], shape: tuple[int, ...]
                ) -> Access:
        """The elements an HBM operand names (contiguous, or ``strides``/``access`` and a
        static ``mask`` in attrs), made when first evaluated (``static_elements``)."""
        t = self.hbm.at(h.buf.addr)
        first = (h.buf.addr - t.addr) // t.itemsize
        return Access(t, None, None, None, {}, shape, (first, attrs, self.access))

    def _mask(self, attrs: dict[str, Any], shape: tuple[int, ...]) -> np.ndarray | None:
        return ix.mask_of(attrs, shape, self.access)

    def _atomic_access(self, cmd: Cmd, attrs: dict[str, Any], shape: tuple[int, ...]
                       ) -> Access:
        hbm = cmd.inputs[0]
        roles = atomic_roles(attrs, cmd.inputs[1:])
        if attrs.get("offsets") == ix.INPUT:  # offsets (and maybe the mask) from TCM
            return Access(self.hbm.at(hbm.buf.addr), None, None, self._mask(attrs, shape),
                          roles, shape)
        access = self._static(hbm, attrs, shape)
        access.roles = roles
        return access

    def _effect(self, cmd: Cmd, op_id: int) -> Late:
        op = cmd.op
        if op in ATOMICS:  # it runs at its start: reads and writes HBM, returns the old values
            node = self._node(cmd)
            assert node.access is not None and cmd.out is not None
            cmd.out.buf.val = node
            return Late(node, Effect(PENDING, node.access, None, op, node.attrs), op_id)
        out = cmd.out
        assert out is not None, "an HBM write names its HBM operand"
        attrs = _attrs(cmd.attrs)
        value = Ref(cmd.inputs[0].buf.val, cmd.inputs[0])
        if op is OP.SCATTER:
            offs = cmd.inputs[1]
            roles = {"offsets": Ref(offs.buf.val, offs)}
            if attrs.get("mask") == ix.INPUT:
                roles["mask"] = Ref(cmd.inputs[2].buf.val, cmd.inputs[2])
            access = Access(self.hbm.at(out.buf.addr), None, None,
                            self._mask(attrs, tuple(offs.shape)), roles, tuple(offs.shape))
        else:
            access = self._static(out, attrs, tuple(out.shape))
        return Late(None, Effect(PENDING, access, value, op, attrs), op_id)


class Late:
    """An op of HBM noted at issue, waiting for its times: a read (``node``) runs at
    ``(t_start, RUN, op_id)``; a write (``effect``) lands at ``(t_end, LAND, op_id)``; an
    atomic (both) reads and writes at its start. ``land`` gives them their keys and puts
    the effect on its tensor (before that, no evaluation sees it)."""

    __slots__ = ("node", "effect", "op_id")

    def __init__(self, node: Node | None, effect: Effect | None, op_id: int) -> None:
        self.node, self.effect, self.op_id = node, effect, op_id

    def land(self, t_start: int, t_end: int) -> None:
        node, effect = self.node, self.effect
        key = None
        if node is not None:
            key = node.key = (t_start, RUN, self.op_id)
        if effect is not None:
            effect.key = key if key is not None else (t_end, LAND, self.op_id)
            effect.access.t.effects.append(effect)


def static_elements(a: Access) -> tuple[np.ndarray, np.ndarray | None]:
    """(flat positions, tile positions or None) of an access whose elements were known when
    it was recorded."""
    first, attrs, table = a.static
    if not ix.is_indexed(attrs):
        n = int(np.prod(a.shape, dtype=np.int64))
        return first + np.arange(n, dtype=np.int64), None
    rel, mask = ix.elements(attrs, a.shape, table)
    sel = None if mask is None else np.flatnonzero(mask.reshape(-1))
    return first + ix.moved(rel, mask).astype(np.int64), sel


def atomic_roles(attrs: dict[str, Any], rest: tuple[TensorHandle, ...]) -> dict[str, Ref]:
    """An atomic's TCM operands after the HBM one, by role: value?, cmp?, offsets?, mask?
    (``[hbm, value?, cmp?, offsets?, mask?]``, docs/trace-format.md)."""
    names = [n for n, on in (("value", "value" not in attrs),
                             ("cmp", attrs.get("cmp") == ix.INPUT),
                             ("offsets", attrs.get("offsets") == ix.INPUT),
                             ("mask", attrs.get("mask") == ix.INPUT)) if on]
    return {n: Ref(h.buf.val, h) for n, h in zip(names, rest, strict=True)}
