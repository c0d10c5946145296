"""The milestone panel: its table, its files, its bad input."""

from __future__ import annotations

import polars as pl
from click.testing import CliRunner

from kernbench.bench import panel
from kernbench.cli import main


def test_panel_rows_carry_the_headline_columns_and_write_parquet_and_csv(tmp_path, monkeypatch):
    small = [panel.Config("decode 1k", "gqa-decode", {"S_kv": 1024, "H_q": 16, "H_kv": 2},
                          replay=True),
             panel.Config("ring 2 x 128", "ring-attention", {"n_ranks": 2, "S_kv_per_rank": 128},
                          link_hiding=True)]
    monkeypatch.setattr(panel, "QUICK", small)
    result = CliRunner().invoke(main, ["panel", "--quick", "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    frame = pl.read_parquet(tmp_path / "out" / "panel.parquet")
    assert frame["config"].to_list() == ["decode 1k", "ring 2 x 128"]
    for col in ("latency_us", "roofline_bound", "efficiency", "dma_read_count", "dma_bytes",
                "scratch_peak_bytes", "record_s", "replay", "link_hidden"):
        assert col in frame.columns
    assert frame["replay"].to_list() == ["ok", "-"]
    assert 0.0 <= frame["link_hidden"][1] <= 1.0
    assert (tmp_path / "out" / "panel.csv").read_text().startswith("config,")
    assert (tmp_path / "out" / "panel.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "decode 1k" in result.output and "efficiency" in result.output


def test_panel_output_that_cannot_be_written_is_bad_input(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = CliRunner().invoke(main, ["panel", "-o", str(blocker / "sub")])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_panel_on_v2_shows_the_headline_rows_side_by_side_with_v1(tmp_path, monkeypatch):
    small = [panel.Config("prefill 128 pipelined", "gqa-prefill",
                          {"S": 128, "T_kv": 64, "H_q": 8, "H_kv": 1, "schedule": "pipelined"},
                          headline=True),
             panel.Config("decode 1k", "gqa-decode", {"S_kv": 1024, "H_q": 16, "H_kv": 2})]
    monkeypatch.setattr(panel, "QUICK", small)
    result = CliRunner().invoke(main, ["panel", "--hw", "ahbm-v2", "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    frame = pl.read_parquet(tmp_path / "out" / "panel.parquet")
    assert frame.select("config", "hw").rows() == [
        ("prefill 128 pipelined", "ahbm-v2"), ("decode 1k", "ahbm-v2"),
        ("prefill 128 pipelined", "ahbm-v1")]  # only the headline row runs on both
    side = panel.compare_presets(frame)
    assert side["config"].to_list() == ["prefill 128 pipelined"]
    v1, v2 = (frame.filter(pl.col("hw") == hw)["latency_us"][0] for hw in ("ahbm-v1", "ahbm-v2"))
    assert side["speedup"][0] == round(v1 / v2, 3) and v2 < v1  # async engines overlap
    assert "ahbm-v1 -> ahbm-v2" in result.output and "speedup" in result.output
    assert (tmp_path / "out" / "panel.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_panel_on_an_unknown_preset_is_one_line_of_bad_input():
    result = CliRunner().invoke(main, ["panel", "--hw", "ahbm-v9"])
    assert result.exit_code == 2 and "ahbm-v9" in result.output
    assert "Traceback" not in result.output


def test_panel_default_preset_is_the_recording_default(tmp_path, monkeypatch):
    """Issue 42: ``panel`` recorded on ahbm-v1 when no ``--hw`` was given while the docs (and
    ``record``) say ahbm-v2: help, code and docs now name one default, ``DEFAULT_PRESET``
    (or ``$KERNBENCH_HW``)."""
    from kernbench.trace.hw import DEFAULT_PRESET

    small = [panel.Config("prefill 128", "gqa-prefill",
                          {"S": 128, "T_kv": 64, "H_q": 8, "H_kv": 1}, headline=True)]
    monkeypatch.setattr(panel, "QUICK", small)
    monkeypatch.delenv("KERNBENCH_HW", raising=False)
    frame = panel.run_panel()
    assert frame["hw"].to_list() == [DEFAULT_PRESET, panel.BASELINE]  # v1 side by side
    monkeypatch.setenv("KERNBENCH_HW", "ahbm-v1")
    assert panel.run_panel()["hw"].to_list() == ["ahbm-v1"]
    help_text = " ".join(CliRunner().invoke(main, ["panel", "--help"]).output.split())
    assert f"[default: {DEFAULT_PRESET}, or $KERNBENCH_HW" in help_text
