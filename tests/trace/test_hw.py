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


# -- the shared memory system's fields (docs/hardware-model.md, "What the shared parts cost")

SHARED_FIELDS = {"hbm_total_gbps": 409.6, "hbm_channels": 8, "hbm_interleave_bytes": 512,
                 "tcm_gbps": 1024, "topology": "switch", "issue_ns": 12.5,
                 "engine_arbitration": "ready_first"}


def test_v1_and_v2_keep_every_shared_part_private_and_unlimited():
    for name in ("ahbm-v1", "ahbm-v2"):
        hw = PRESETS[name]
        assert (hw.hbm_total_gbps, hw.tcm_gbps, hw.topology, hw.issue_ns,
                hw.engine_arbitration) == (0, 0, "ring", 0, "in_order")
        assert not hw.shared
    assert PRESETS["ahbm-v3"].shared


def test_toml_sets_every_shared_field_and_the_dict_round_trips(tmp_path):
    f = tmp_path / "chip.toml"
    f.write_text('base = "ahbm-v2"\n' + "".join(
        f"{k} = {v!r}\n".replace("'", '"') for k, v in SHARED_FIELDS.items()))
    hw = load_hw(f)
    assert {k: getattr(hw, k) for k in SHARED_FIELDS} == SHARED_FIELDS
    assert hw.engine_issue == "async" and hw.shared
    assert HwConfig.from_dict(hw.to_dict()) == hw


@pytest.mark.parametrize("field,value,needle", [
    ("hbm_total_gbps", -1, "hbm_total_gbps must be a non-negative number, got -1"),
    ("hbm_total_gbps", float("nan"), "hbm_total_gbps must be finite, got nan"),
    ("hbm_channels", 0, "hbm_channels must be positive, got 0"),
    ("hbm_channels", 2.5, "hbm_channels must be a whole number, got 2.5"),
    ("hbm_channels", 10**6, "hbm_channels must be at most 4096, got 1000000"),
    ("hbm_interleave_bytes", 0, "hbm_interleave_bytes must be positive, got 0"),
    ("hbm_interleave_bytes", "256", "hbm_interleave_bytes must be a non-negative number, "
                                    "got '256'"),
    ("tcm_gbps", float("inf"), "tcm_gbps must be finite, got inf"),
    ("tcm_gbps", True, "tcm_gbps must be a non-negative number, got True"),
    ("topology", "torus", "topology must be one of .* got 'torus'; did you mean 'torus2d'"),
    ("topology", 2, "topology must be one of .* got 2$"),
    ("issue_ns", -0.5, "issue_ns must be a non-negative number, got -0.5"),
    ("engine_arbitration", "ready", "engine_arbitration must be one of .*; did you mean "
                                    "'ready_first'"),
])
def test_each_shared_field_refuses_a_bad_value_in_one_line(field, value, needle):
    with pytest.raises(BadInputError, match=needle) as info:
        HwConfig(**{field: value})
    assert "\n" not in str(info.value)


def test_a_count_given_as_a_fraction_is_refused_not_a_traceback_later(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("n_pe = 8.5\n")
    with pytest.raises(BadInputError, match="n_pe must be a whole number, got 8.5"):
        load_hw(f)


def test_an_unknown_field_names_the_closest_known_one(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("hbm_total_gbs = 819.2\n")
    with pytest.raises(BadInputError, match=r"did you mean 'hbm_total_gbps'\?"):
        load_hw(f)
