"""ahbm-v2 is the preset of a recording that names none; KERNBENCH_HW overrides it
(ADR-0524). The rest of the suite pins ahbm-v1 through it (tests/conftest.py)."""

from __future__ import annotations

import dataclasses

from kernbench.trace.hw import HW_ENV, PRESETS, load_hw


def test_no_hardware_named_means_ahbm_v2_unless_kernbench_hw_says_otherwise(
        monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(HW_ENV, raising=False)
    assert load_hw(None) == PRESETS["ahbm-v2"]
    monkeypatch.setenv(HW_ENV, "ahbm-v1")
    assert load_hw(None) == PRESETS["ahbm-v1"]
    f = tmp_path / "mine.toml"
    f.write_text('[hw]\nbase = "ahbm-v2"\nmax_programs_per_pe = 3\n')
    monkeypatch.setenv(HW_ENV, str(f))
    assert load_hw(None) == dataclasses.replace(PRESETS["ahbm-v2"], name="mine",
                                                max_programs_per_pe=3)
