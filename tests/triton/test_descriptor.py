"""Tensor descriptors' host side and refusals (the kernels are in ``kernels/tma.py``, run by
``test_kernels.py`` against numpy and ``test_differential.py`` against Triton's interpreter)."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.errors import BadInputError, KernelError
from kernbench.triton.descriptor import TensorDescriptor, host_spec, tensor_descriptor


def test_kernbench_descriptor_of_a_numpy_array_has_element_strides() -> None:
    a = np.zeros((6, 10), np.float16)
    d = TensorDescriptor.from_tensor(a, [4, 8])
    assert (d.shape, d.strides, d.block_shape, d.padding) == ([6, 10], [10, 1], [4, 8], "zero")
    spec = host_spec("a_desc", d)
    assert (spec.shape, spec.strides, spec.block_shape) == ((6, 10), (10, 1), (4, 8))


def test_a_host_descriptor_of_mismatched_rank_or_padding_is_bad_input() -> None:
    a = np.zeros((6, 10), np.float32)
    with pytest.raises(BadInputError, match=r"descriptor x: shape \[6, 10\], strides \[10, 1\] "
                                            r"and block_shape \[4\] differ in rank"):
        host_spec("x", TensorDescriptor(a, [6, 10], [10, 1], [4]))
    with pytest.raises(BadInputError, match="padding 'inf' is not one of"):
        host_spec("x", TensorDescriptor(a, [6, 10], [10, 1], [4, 8], "inf"))


def test_the_stand_in_triton_tools_module_is_kernbenchs_descriptor() -> None:
    import importlib

    from kernbench.case.triton_hook import STAND_INS

    mod = importlib.import_module(STAND_INS["triton.tools.tensor_descriptor"])
    assert mod.TensorDescriptor is TensorDescriptor


@pytest.mark.parametrize("name", ["gather", "atomic_add"])
def test_a_descriptor_method_kernbench_lacks_is_refused_at_the_kernel_line(name: str) -> None:
    desc = tensor_descriptor.__new__(tensor_descriptor)
    with pytest.raises(KernelError, match=f"descriptor .{name} is not supported by kernbench"
                       ) as err:
        getattr(desc, name)
    assert "test_descriptor.py:" in str(err.value)
