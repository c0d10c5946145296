"""MemoryStore: regions, operands, the per-byte valid map and its error messages."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.errors import ReplayError, TraceFormatError
from kernbench.replay.store import SPACES, MemoryStore, SpaceSpec, check_read
from kernbench.trace.hw import HwConfig

HW = HwConfig().to_dict()


def store_with(*regions: tuple[int, int, str]) -> MemoryStore:
    return MemoryStore(HW, list(regions))


def test_tcm_and_stage_are_sized_from_the_recorded_hw() -> None:
    hw = dict(HW, kernel_scratch_kib=4, stage_kib=2)
    store = MemoryStore(hw, [])
    assert store.memory("tcm", 3).size == 4096
    assert store.memory("stage", 0).size == 2048


def test_hbm_is_sized_by_its_tensor_regions() -> None:
    store = store_with((0, 64, "x"), (4096, 4100, "y"))
    assert store.memory("hbm", 0).size == 4100


def test_an_operand_inside_one_region_gets_a_live_view() -> None:
    store = store_with((0, 64, "x"))
    store.fill("hbm", 0, 0, np.arange(16, dtype=np.float32).tobytes())
    o = store.operand("hbm", 0, 16, (2, 3), "float32", False)
    assert o.error is None
    np.testing.assert_array_equal(o.view, np.arange(4, 10, dtype=np.float32).reshape(2, 3))
    o.view[0, 0] = 99
    assert np.frombuffer(store.read_bytes("hbm", 0, 16, 20), np.float32)[0] == 99


def test_a_transposed_operand_views_the_reversed_row_major_bytes() -> None:
    store = store_with((0, 64, "x"))
    store.fill("hbm", 0, 0, np.arange(6, dtype=np.float32).tobytes())
    o = store.operand("hbm", 0, 0, (3, 2), "float32", True)
    np.testing.assert_array_equal(o.view, np.arange(6, dtype=np.float32).reshape(2, 3).T)


def test_an_operand_crossing_two_regions_is_an_error_naming_the_range() -> None:
    store = store_with((0, 16, "x"), (16, 32, "y"))
    o = store.operand("hbm", 0, 8, (4,), "float32", False)
    assert "[8, 24)" in o.error and "not inside one region" in o.error
    with pytest.raises(ReplayError, match=r"op 7 .*input 1 hbm@pe0 \[8, 24\).*not inside one"):
        check_read(o, "op 7 (exp at k.py:3)", 1)


@pytest.mark.parametrize(("space", "pe", "message"), [
    ("sram", 0, "unknown memory space 'sram'"),
    ("tcm", 8, "tcm of pe 8 does not exist"),
    ("hbm", 1, "hbm is one shared space"),
])
def test_operands_in_memories_that_do_not_exist_are_errors(space: str, pe: int,
                                                            message: str) -> None:
    o = store_with((0, 64, "x")).operand(space, pe, 0, (4,), "float32", False)
    assert message in o.error


def test_an_unknown_dtype_is_an_operand_error() -> None:
    o = store_with((0, 64, "x")).operand("hbm", 0, 0, (4,), "float64", False)
    assert "unknown dtype 'float64'" in o.error


def test_operands_are_resolved_once_per_distinct_key() -> None:
    store = store_with((0, 64, "x"))
    a = store.operand("hbm", 0, 0, (4,), "float32", False)
    assert store.operand("hbm", 0, 0, (4,), "float32", False) is a
    assert store.operand("hbm", 0, 0, (2, 2), "float32", False) is not a
    assert store.n_operands == 2


def test_tcm_starts_invalid_and_reading_it_names_the_invalid_bytes() -> None:
    o = store_with().operand("tcm", 2, 32, (4,), "float32", False)
    with pytest.raises(ReplayError, match=r"input 0 tcm@pe2 \[32, 48\).*read of invalid bytes "
                                          r"\(first invalid byte at 32, 16 of 16 invalid\)"):
        check_read(o, "op 3 (add at k.py:9)", 0)


def test_filled_bytes_are_valid_and_invalidate_rewinds_them() -> None:
    store = store_with()
    store.fill("tcm", 0, 0, bytes(64))
    o = store.operand("tcm", 0, 16, (4,), "float32", False)
    check_read(o, "op", 0)
    store.memory("tcm", 0).invalidate(24, 40)
    with pytest.raises(ReplayError, match=r"first invalid byte at 24, 8 of 16 invalid"):
        check_read(o, "op", 0)


def test_the_set_of_spaces_is_a_table_a_new_space_can_join() -> None:
    spaces = dict(SPACES, sram=SpaceSpec("sram", per_pe=True, size=lambda hw: 256))
    store = MemoryStore(HW, [], spaces)
    o = store.operand("sram", 1, 0, (8,), "int32", False)
    assert o.error is None and store.memory("sram", 1).size == 256


def test_ipcq_slots_are_sized_from_depth_and_slot_size() -> None:
    hw = dict(HW, ipcq_depth=3, ipcq_slot_kib=2)
    assert MemoryStore(hw, []).memory("ipcq", 0).size == 2 * 3 * 2048


def test_a_hw_without_n_pe_is_a_trace_format_error() -> None:
    with pytest.raises(TraceFormatError, match="n_pe"):
        MemoryStore({"kernel_scratch_kib": 1}, [])
