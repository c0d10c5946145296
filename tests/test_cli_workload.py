"""``kernbench workload``: thin over kb.Workload; bad input is one line, exit 2, nothing
recorded."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kernbench.cli import main

TINY = ["-p", "hidden=128", "-p", "heads=16", "-p", "kv_heads=8", "-p", "head_dim=16",
        "-p", "ffn=256", "-p", "vocab=512", "-p", "batch=2", "-p", "context=64"]


def test_workload_json_is_one_object_with_rows_and_the_model_answer(tmp_path):
    pic = tmp_path / "layer.png"
    result = CliRunner().invoke(main, ["workload", "llama3-70b", *TINY, "--hw", "ahbm-v3",
                                       "--no-verify", "--json", "--plot", str(pic),
                                       "-o", str(tmp_path / "w")])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert {"rows", "layer_s", "token_s", "tokens_per_s", "floor_layer_s"} <= set(body)
    assert body["tokens_per_s"] == pytest.approx(2 / body["token_s"])
    assert [r["name"] for r in body["rows"]][:3] == ["attn_norm", "qkv_proj", "rope"]
    assert pic.stat().st_size > 0
    kept = {p.name for p in (tmp_path / "w").glob("*.ktrace")}
    assert {r["trace"] for r in body["rows"]} == kept  # a repeated launch is recorded once
    assert len(kept) < len(body["rows"]) == 13


@pytest.mark.parametrize("args,needle", [
    (["llama2-7b"], "unknown workload 'llama2-7b'"),
    (["llama3-70b", "-p", "batch"], "parameter 'batch' is not KEY=VALUE"),
    (["llama3-70b", "-p", "contxt=4096"], "did you mean 'context'"),
    (["llama3-70b", "--plot", "layer.gif"], "--plot 'layer.gif'"),
    (["llama3-70b", "--like", "nowhere"], "--like 'nowhere' is not a folder"),
    (["llama3-70b", "-p", "batch=64", "-p", "context=32768"],
     "the attention launch of llama3-70b decode batch=64 context=32768"),
])
def test_bad_workload_input_is_one_line_and_records_nothing(tmp_path, args, needle):
    out = tmp_path / "w"
    result = CliRunner().invoke(main, ["workload", *args, "-o", str(out)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.output
    assert not out.exists()
