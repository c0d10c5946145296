"""``kb.tensor(init=array)`` is ``kb.data(array)``."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench as kb


def test_tensor_init_takes_an_array(tmp_path):
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 3
    t = kb.tensor((2, 4), "float32", init=x)
    assert t.init.kind == "data"
    np.testing.assert_array_equal(t.init.make((2, 4), t.dtype), x)
    np.testing.assert_array_equal(kb.tensor((2, 4), "float32", init=x.tolist()).init.make(
        (2, 4), t.dtype), x)
    bf = kb.tensor((2, 4), "bfloat16", init=x)
    same = kb.tensor((2, 4), "bfloat16", init=kb.data(x))
    np.testing.assert_array_equal(bf.init.make((2, 4), bf.dtype),
                                  same.init.make((2, 4), same.dtype))


def test_tensor_init_refuses_a_wrong_shape_or_a_non_array():
    with pytest.raises(kb.BadInputError, match=r"init array has shape \(3,\), the tensor \(2, 4\)"):
        kb.tensor((2, 4), "float32", init=np.ones(3))
    with pytest.raises(kb.BadInputError, match="init 'abc' is not kb.randn()"):
        kb.tensor((2, 4), "float32", init="abc")  # type: ignore[arg-type]
