"""TensorHandle's operators call the kernel front end through a typed protocol
(``record.handle.FrontEnd``), bound once by ``record/lowering/semantics.py``."""

from __future__ import annotations

import types

import pytest

from kernbench.errors import KernelError
from kernbench.record import handle
from kernbench.record.lowering import semantics


def test_the_bound_front_end_is_the_semantics_module_and_satisfies_the_protocol() -> None:
    assert isinstance(semantics, handle.FrontEnd)
    assert handle._sem is semantics


def test_binding_something_that_lacks_an_operation_is_refused_naming_it() -> None:
    partial = types.SimpleNamespace(binary=print, unary=print, trans=print, cast=print)
    with pytest.raises(TypeError, match=r"not a kernel front end: it lacks \['src_here'\]"):
        handle.bind_front_end(partial)
    assert handle._sem is semantics  # the bound front end is kept


@pytest.mark.parametrize("operation", ["binary", "unary", "trans", "cast", "src_here"])
def test_operators_before_the_front_end_is_bound_are_a_kernel_error(operation: str) -> None:
    unbound = handle._Unbound()
    n_args = {"binary": 3, "unary": 2, "trans": 1, "cast": 2, "src_here": 0}[operation]
    with pytest.raises(KernelError, match="need the tl front end"):
        getattr(unbound, operation)(*[None] * n_args)
