"""The front end's values are three classes a checker reads (ADR-0620): every value a kernel
holds is a ``Concrete``, ``Pointer`` or ``Symbolic`` and an instance of ``tl.tensor``, each
with its own typed payload; a pointer where arithmetic needs numbers is a one-line
KernelError, not an AttributeError from deep inside the front end."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import triton
import triton.language as tl

import kernbench as kb
from kernbench import triton as kbt
from kernbench.errors import KernelError, UnsupportedError
from kernbench.record.handle import TensorHandle
from kernbench.triton import binding, value
from kernbench.triton.value import Concrete, Pointer, Symbolic, concrete, int_value

HERE = re.escape(f"{__name__.replace('.', '/')}.py")
SRC = Path(kbt.__file__).parent
BLOCK = 8

#: what the probe saw, by name: (class, isinstance(x, tl.tensor) in the kernel, payload type)
SEEN: dict[str, tuple[type, bool, type, str]] = {}


def _see(name: str, x: object, is_tl_tensor: bool) -> None:
    """Called from the kernel body (kernbench runs it as Python): keeps no reference."""
    payload = {Concrete: "value", Pointer: "offsets", Symbolic: "handle"}[type(x)]
    SEEN[name] = (type(x), is_tl_tensor, type(getattr(x, payload)), repr(x))


@triton.jit
def probe(x_ptr, idx_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    _see("index", offs, isinstance(offs, tl.tensor))
    _see("pointer", x_ptr + offs, isinstance(x_ptr + offs, tl.tensor))
    x = tl.load(x_ptr + offs)
    _see("data", x, isinstance(x, tl.tensor))
    g = x_ptr + tl.load(idx_ptr + offs)
    _see("gather", g, isinstance(g, tl.tensor))
    _see("max", max(x, 0.0), True)  # Python's max of a block is tl.maximum, as in Triton
    _see("min", min(offs, 3), True)
    tl.store(out_ptr + offs, tl.load(g) + x)


def test_every_value_is_one_of_three_tl_tensor_classes_with_its_payload(tmp_path) -> None:
    x = np.arange(BLOCK, dtype=np.float32)
    idx = np.arange(BLOCK, dtype=np.int32)[::-1].copy()
    SEEN.clear()
    case = kbt.case(probe, (1,), x, idx, np.zeros(BLOCK, np.float32), BLOCK=BLOCK,
                    outputs=["out_ptr"])
    kb.record(case, tmp_path / "p.ktrace")
    assert SEEN["index"][:3] == (Concrete, True, np.ndarray)
    assert SEEN["pointer"][:3] == (Pointer, True, np.ndarray)
    assert SEEN["data"][:3] == (Symbolic, True, TensorHandle)
    assert SEEN["gather"][:3] == (Pointer, True, TensorHandle)  # offsets from loaded data
    assert SEEN["max"][:3] == (Symbolic, True, TensorHandle)
    assert SEEN["min"][3].startswith("tl.tensor(array([0, 1, 2, 3, 3, 3, 3, 3]")
    assert SEEN["data"][3] == f"tl.tensor(symbolic, [{BLOCK}], float32)"
    assert SEEN["gather"][3] == f"tl.tensor(pointer, [{BLOCK}], pointer<float32>)"


@triton.jit
def where_of_pointers(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = tl.where(offs < 4, x_ptr + offs, x_ptr)
    tl.store(p, 1.0)


@triton.jit
def pointer_mask(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 1.0, mask=x_ptr + offs)


@triton.jit
def sum_of_pointers(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr, tl.sum(x_ptr + tl.arange(0, BLOCK)))


@triton.jit
def exp_of_pointers(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.exp(x_ptr + offs))


@triton.jit
def bitcast_of_pointer(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr, (x_ptr + 1).to(tl.int32, bitcast=True))


@pytest.mark.parametrize(("kernel", "match"), [
    (where_of_pointers, "tl.where of a pointer is not supported by kernbench"),
    (pointer_mask, r"mask must be boolean \(int1\), got pointer<float32>"),
    (sum_of_pointers, "tl.sum of a pointer is not supported by kernbench"),
    (exp_of_pointers, "tl.exp expects fp32 or fp64, got pointer<float32>"),
    (bitcast_of_pointer, r"casting a pointer \(.to\(tl.pointer_type\(...\)\)\) is not"),
], ids=["where", "mask", "sum", "exp", "bitcast"])
def test_a_pointer_where_numbers_are_needed_is_a_kernel_error(tmp_path, kernel, match) -> None:
    c = kbt.case(kernel, (1,), np.zeros(BLOCK, np.float32), BLOCK=BLOCK, outputs=["x_ptr"])
    with pytest.raises(KernelError, match=rf"^{HERE}:\d+: .*{match}"):
        kb.record(c, tmp_path / "t.ktrace")


def test_operators_before_core_is_imported_name_the_module_to_import() -> None:
    with pytest.raises(KernelError, match="need kernbench.triton.core"):
        binding._Unbound().binary("add", 1, 2)


def test_concrete_scalars_keep_pythons_protocols() -> None:
    three = concrete(np.int32(3))
    assert isinstance(three, Concrete) and int(three.value) == 3
    assert [10, 20, 30, 40][three] == 40  # __index__
    assert bool(three) and not bool(concrete(np.int32(0)))
    assert repr(three) == "tl.tensor(array(3, dtype=int32), int32)"
    with pytest.raises(KernelError, match=r"truth value of a \[2\] block is ambiguous"):
        bool(concrete(np.arange(2, dtype=np.int32)))
    with pytest.raises(KernelError, match=r"is not a concrete integer scalar"):
        [0][concrete(np.float32(0.5))]


def test_payload_fields_of_other_kinds_are_plain_attribute_errors() -> None:
    """``hasattr`` keeps working: a field another kind holds is missing without a message,
    a Triton member kernbench lacks is refused by name."""
    x = concrete(np.arange(4, dtype=np.int32))
    for field in ("handle", "offsets", "base"):
        with pytest.raises(AttributeError) as err:
            getattr(x, field)
        assert type(err.value) is AttributeError
    with pytest.raises(UnsupportedError, match=r"tl.tensor.gather is not supported"):
        x.gather  # noqa: B018


def test_int_value_refuses_a_non_number_in_one_line() -> None:
    assert int_value(concrete(np.int32(7)), "loop bound", "k.py:1") == 7
    assert int_value(np.int64(5), "loop bound", "k.py:1") == 5
    with pytest.raises(KernelError, match=r"^k.py:1: loop bound 'a' must be an integer"):
        int_value("a", "loop bound", "k.py:1")


def test_the_kind_strings_are_gone_from_the_front_end() -> None:
    for name in ("CONCRETE", "POINTER", "SYMBOLIC"):
        assert not hasattr(value, name)
    for path in SRC.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\b(CONCRETE|POINTER|SYMBOLIC)\b|\.kind == \"(concrete|pointer|"
                             r"symbolic)\"", text), path.name


#: the value and operation modules (ADR-0620): at most this many lines may name ``Any``
VALUE_MODULES = ("value", "arith", "mathops", "memory", "data", "blocks", "boolops", "combine",
                 "descriptor", "random", "sorting", "libdevice", "dtypes", "tlmath")


def test_the_value_modules_name_any_on_at_most_60_lines() -> None:
    lines = [f"{m}.py:{i}" for m in VALUE_MODULES
             for i, line in enumerate((SRC / f"{m}.py").read_text().splitlines(), 1)
             if re.search(r"\bAny\b", line)]
    assert len(lines) <= 60, lines
