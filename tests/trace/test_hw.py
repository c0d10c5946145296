"""Hardware config: preset, TOML loading, validation."""

from __future__ import annotations

import pytest

from kernbench.errors import BadInputError
from kernbench.trace.hw import PRESETS, HwConfig, load_hw


def test_ahbm_v1_preset_matches_the_spec_table():
    hw = PRESETS["ahbm-v1"]
    assert (hw.n_pe, hw.clock_ghz, hw.hbm_gbps, hw.dma_latency_ns) == (8, 1.0, 128, 500)
    assert (hw.gemm_rows, hw.gemm_cols, hw.gemm_overhead_cycles) == (128, 128, 32)
    assert (hw.math_lanes, hw.math_transcendental_cost, hw.math_overhead_cycles) == (128, 2, 8)
    assert (hw.kernel_scratch_kib, hw.stage_kib) == (1024, 512)
    assert (hw.link_gbps, hw.link_latency_ns, hw.ipcq_depth) == (64, 1000, 2)


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        HwConfig().n_pe = 4  # type: ignore[misc]


def test_toml_overrides_the_base_preset(tmp_path):
    f = tmp_path / "big.toml"
    f.write_text("[hw]\nkernel_scratch_kib = 4096\nn_pe = 4\n")
    hw = load_hw(f)
    assert hw.kernel_scratch_kib == 4096 and hw.n_pe == 4 and hw.hbm_gbps == 128
    assert hw.name == "big"
    assert HwConfig.from_dict(hw.to_dict()) == hw


@pytest.mark.parametrize("text,needle", [
    ("n_pe = 0\n", "n_pe must be positive, got 0"),
    ("hbm_gbbs = 1\n", "unknown hw fields ['hbm_gbbs']"),
    ("n_pe = [\n", "not valid TOML"),
    ('dma_latency_ns = "x"\n', "dma_latency_ns must be a non-negative number, got 'x'"),
])
def test_bad_toml_is_bad_input(tmp_path, text, needle):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(BadInputError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        load_hw(f)
