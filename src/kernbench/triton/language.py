"""kernbench's ``triton.language``: the namespace a Triton kernel body sees as ``tl``.

Every supported call is defined here (or re-exported from the modules that implement it);
any other attribute is a ``KernelError`` naming it and the kernel line.
"""

from __future__ import annotations

from typing import SupportsIndex, SupportsInt

from kernbench.errors import UnsupportedError
from kernbench.record.source import src_here
from kernbench.triton import arith, blocks, combine, core, mathops, memory, random, sorting
from kernbench.triton.descriptor import (
    load_tensor_descriptor,
    make_tensor_descriptor,
    store_tensor_descriptor,
    tensor_descriptor,
)
from kernbench.triton.dtypes import (
    bfloat16,
    dtype,
    float16,
    float32,
    float64,
    int1,
    int8,
    int16,
    int32,
    int64,
    pointer_type,
    uint8,
    uint16,
    uint32,
    uint64,
)
from kernbench.triton.memory import advance, block_ptr, load, make_block_ptr, store
from kernbench.triton.value import tensor


class constexpr:  # noqa: N801 - Triton's spelling
    """``tl.constexpr``: the annotation of compile-time parameters, and a box for module-level
    constants (the front end passes the plain value to the kernel)."""

    def __init__(self, value: object) -> None:
        self.value: object = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"

    def __index__(self) -> int:
        v = self.value
        if isinstance(v, str | SupportsInt | SupportsIndex):
            return int(v)
        raise TypeError(f"{self!r} is not an integer")

    def __bool__(self) -> bool:
        return bool(self.value)

    def __eq__(self, other: object) -> bool:
        return self.value == arith.plain(other)

    def __hash__(self) -> int:
        return hash(self.value)


Unsupported = UnsupportedError  # a ``tl`` name kernbench does not implement


program_id, num_programs, arange = core.program_id, core.num_programs, core.arange
zeros, zeros_like, full, full_like = core.zeros, core.zeros_like, core.full, core.full_like
reshape, view, expand_dims, trans = core.reshape, core.view, core.expand_dims, core.trans
permute, broadcast_to, broadcast = core.permute, core.broadcast_to, core.broadcast
static_range, range, cdiv = core.static_range, core.range, core.cdiv  # noqa: A001
static_assert, debug_barrier = core.static_assert, core.debug_barrier
multiple_of, max_contiguous, max_constancy = (core.multiple_of, core.max_contiguous,
                                              core.max_constancy)
where, maximum, minimum, clamp = arith.where, mathops.maximum, mathops.minimum, mathops.clamp
fma, fdiv, div_rn, dot = mathops.fma, mathops.fdiv, mathops.div_rn, blocks.dot
split, join, interleave, flip = blocks.split, blocks.join, blocks.interleave, blocks.flip
histogram, reduce, associative_scan = blocks.histogram, combine.reduce, combine.associative_scan
cat = sorting.cat


def assume(cond: object) -> None:
    """A compiler hint: no effect."""
sum, max, min = mathops.sum, mathops.max, mathops.min  # noqa: A001
argmax, argmin, cumsum, softmax = mathops.argmax, mathops.argmin, mathops.cumsum, mathops.softmax
cumprod, ravel = mathops.cumprod, core.ravel
exp, exp2, log, log2 = (mathops.MATH1[n] for n in ("exp", "exp2", "log", "log2"))
sqrt, rsqrt, sigmoid, tanh = (mathops.MATH1[n] for n in ("sqrt", "rsqrt", "sigmoid", "tanh"))
erf, abs, floor, ceil = (mathops.MATH1[n] for n in ("erf", "abs", "floor", "ceil"))  # noqa: A001
cos, sin = mathops.MATH1["cos"], mathops.MATH1["sin"]
globals().update(memory.ATOMICS)
rand, randn, randint, randint4x = random.rand, random.randn, random.randint, random.randint4x
philox, rand4x, randn4x = random.philox, random.rand4x, random.randn4x
uint_to_uniform_float, pair_uniform_to_normal = (random.uint_to_uniform_float,
                                                 random.pair_uniform_to_normal)


def cast(input: object, dtype: object, fp_downcast_rounding: object = None, bitcast: bool = False
         ) -> tensor:
    return arith.cast(input, dtype, bitcast)


def static_print(*values: object, **_kw: object) -> None:
    """Prints while recording (constexprs and shapes are known then, as at compile time)."""
    print(*values)


def device_assert(cond: object, msg: object = "", mask: object = None) -> None:
    """Compiled away, as Triton does unless its debug mode is on: no effect."""


#: names kernbench does not run, and why (``tl.X is not supported by kernbench: why``)
REFUSED = {
    "inline_asm_elementwise": "inline assembly names GPU instructions the modelled hardware "
                              "does not have",
    "device_print": "it prints data, which Phase 1 (recording) does not have",
    "gather": "a gather of a block by data-dependent indices has no op in kernbench's op table",
    "dot_scaled": "fp8/fp4 scaled dots: kernbench's dtypes have no fp8 or fp4",
    "inline_asm": "inline assembly names GPU instructions",
    "map_elementwise": "a per-element Python function has no op in kernbench's op table",
}


#: ``x.sum(...)``, ``x.reshape(...)``: Triton's tensor member functions
_MEMBERS = ("cast", "split", "reduce", "associative_scan", "histogram", "flip",
            "sum", "max", "min", "argmax", "argmin", "cumsum", "cumprod", "ravel", "reshape",
            "view", "trans", "permute", "broadcast_to", "expand_dims", "exp", "exp2", "log",
            "log2", "sqrt", "rsqrt", "sigmoid", "erf", "abs", "floor", "ceil", "cos", "sin",
            "softmax")
for _name in _MEMBERS:
    setattr(tensor, _name, globals()[_name])
del _name
#: member spellings of other ``tl`` functions (``ptr.store(v)``, ``a.logical_and(b)``)
_MEMBER_ALIASES = {"store": store, "cdiv": core.cdiv, "sqrt_rn": mathops.MATH1["sqrt"],
                   "logical_and": lambda a, b: arith.binary("and_", a.cast(int1), b),
                   "logical_or": lambda a, b: arith.binary("or_", a.cast(int1), b),
                   **memory.ATOMICS}
for _name, _fn in _MEMBER_ALIASES.items():
    setattr(tensor, _name, _fn)
del _name, _fn

__all__ = [
    "advance", "block_ptr", "constexpr", "dtype", "load", "make_block_ptr", "pointer_type",
    "store", "tensor", "cast", "bfloat16", "float16", "float32", "float64", "int1", "int8",
    "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", *_MEMBERS,
    "program_id", "num_programs", "arange", "zeros", "zeros_like", "full", "full_like",
    "broadcast", "static_range", "range", "cdiv", "static_assert", "debug_barrier",
    "multiple_of", "max_contiguous", "max_constancy", "where", "maximum", "minimum", "clamp",
    "fma", "fdiv", "div_rn", "dot", "tanh", "math", "extra", *memory.ATOMICS,
    "rand", "randn", "randint", "randint4x", "philox", "rand4x", "randn4x",
    "uint_to_uniform_float", "pair_uniform_to_normal", "random", "split", "join",
    "interleave", "flip", "histogram",
    "reduce", "associative_scan", "make_tensor_descriptor", "load_tensor_descriptor",
    "store_tensor_descriptor", "tensor_descriptor", "static_print", "device_assert",
    "standard", "reduce_or",
    "squeeze", "swizzle2d", "unsqueeze", "xor_sum", "sort", "topk", "cat", "assume",
]


def __getattr__(name: str) -> object:
    if name.startswith("__"):
        raise AttributeError(name)
    why = REFUSED.get(name, "kernbench's Triton front end does not implement it")
    raise Unsupported(f"tl.{name} is not supported by kernbench: {why}", src_here())


# submodules as attributes (``tl.math.exp``)
from kernbench.triton import extra, standard  # noqa: E402
from kernbench.triton import tlmath as math  # noqa: E402
from kernbench.triton.standard import (  # noqa: E402
    reduce_or,
    sort,
    squeeze,
    swizzle2d,
    topk,
    unsqueeze,
    xor_sum,
)

for _name in ("reduce_or", "xor_sum", "sort"):
    setattr(tensor, _name, globals()[_name])
del _name


def _from_language(name: str) -> object:
    """``triton.language.standard.NAME`` for a name the language defines (or refuses)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return globals()[name] if name in globals() else __getattr__(name)


setattr(standard, "__getattr__", _from_language)  # noqa: B010 - a module's PEP 562 hook
