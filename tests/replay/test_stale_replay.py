"""replay/ is bound to the trace it replayed (ADR-0538): after the trace is edited (and its
manifest re-stamped), ``diff``, ``sql``, ``report``, the notebook table and ``load_result``
say the replay is not this trace's, instead of reporting it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from tests.fuzz.corrupt import restamp

import kernbench as kb
from kernbench.cli import main
from kernbench.errors import TraceFormatError
from kernbench.replay import load_result

GOLDEN = Path(__file__).parents[2] / "traces" / "softmax.ktrace"
NOT_OURS = "not this trace's replay"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stale") / "s.ktrace"
    shutil.copytree(GOLDEN, path)
    kb.replay(path, in_process=True)
    return path


def _cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.stdout, r.stderr


def _edited(replayed: Path, tmp_path: Path) -> Path:
    """A copy whose ops.parquet changed after the replay (one op ends 1 ps later; valid)."""
    path = tmp_path / "edited.ktrace"
    shutil.copytree(replayed, path)
    t = pq.read_table(path / "ops.parquet")
    i = t.schema.get_field_index("busy_ps")
    busy = t.column(i).to_pylist()
    busy[0] = max(0, busy[0] - 1)
    pq.write_table(t.set_column(i, t.schema.field(i), pa.array(busy, pa.int64())),
                   path / "ops.parquet")
    restamp(path)
    return path


def test_a_fresh_replay_is_used_by_every_reader(replayed: Path) -> None:
    verdict = json.loads((replayed / "replay" / "verdict.json").read_text())
    manifest = json.loads((replayed / "manifest.json").read_text())
    assert verdict["trace_files"] == manifest["files"]
    code, out, err = _cli("report", str(replayed))
    assert code == 0 and "replay: verified against registry:softmax" in out and not err
    code, out, err = _cli("diff", str(replayed), str(replayed))
    assert code == 0 and "(replayed values not compared)" not in out and not err
    code, out, err = _cli("sql", str(replayed), "SELECT count(*) AS n FROM values")
    assert code == 0 and not err
    assert load_result(replayed).verified


def test_a_trace_edited_after_replay_makes_every_reader_say_so(replayed: Path,
                                                               tmp_path: Path) -> None:
    path = _edited(replayed, tmp_path)
    code, out, err = _cli("diff", str(path), str(replayed))
    assert code in (0, 1) and NOT_OURS in err and "ops.parquet changed" in err
    assert "replayed values: not compared" in out or "values not compared" in out
    code, out, err = _cli("sql", str(path), "SELECT count(*) AS n FROM ops")
    assert code == 0 and NOT_OURS in err
    code, out, err = _cli("sql", str(path), "SELECT count(*) AS n FROM values")
    assert code == 2 and "relation 'values' was not found" in err
    code, out, err = _cli("report", str(path))
    assert code == 0 and "replay: ignored: it replayed other contents" in out
    assert "ignoring" in err
    code, out, _ = _cli("report", str(path), "--json")
    assert json.loads(out)["replay"].startswith("ignored")
    with pytest.raises(TraceFormatError, match=NOT_OURS):
        load_result(path)
    assert "ignored: it replayed other contents" in kb.Trace.open(path)._repr_html_()


def test_a_verdict_that_does_not_name_its_contents_is_not_trusted(replayed: Path,
                                                                  tmp_path: Path) -> None:
    path = tmp_path / "old.ktrace"
    shutil.copytree(replayed, path)
    vpath = path / "replay" / "verdict.json"
    verdict = json.loads(vpath.read_text())
    del verdict["trace_files"]
    vpath.write_text(json.dumps(verdict))
    code, _, err = _cli("diff", str(path), str(replayed))
    assert "does not record which trace contents it replayed" in err
    with pytest.raises(TraceFormatError, match="does not record"):
        load_result(path)


def test_values_of_an_unchanged_copy_stay_usable(replayed: Path, tmp_path: Path) -> None:
    """Binding is by contents, not by path: a copied trace keeps its replay."""
    path = tmp_path / "copy.ktrace"
    shutil.copytree(replayed, path)
    code, out, err = _cli("sql", str(path), "SELECT count(*) AS n FROM values")
    assert code == 0 and not err
    n = pq.read_table(path / "replay" / "values.parquet").num_rows
    assert n > 0 and f"\n{n}\n" in out
