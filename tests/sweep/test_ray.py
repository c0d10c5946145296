"""The Ray engine on a local Ray (one session for this module, 2 CPUs): the same spec gives
the same points.parquet (apart from wall times) and the same trace bytes as the pool."""

from __future__ import annotations

import json

import pytest
import ray

from kernbench.sweep import run_sweep
from kernbench.sweep.ray_engine import init_kwargs

from .conftest import points_without_walls


@pytest.fixture(scope="module")
def ray_session():
    ray.init(**init_kwargs(num_cpus=2))
    yield
    ray.shutdown()


def _manifests(root):
    return {p.parent.name: json.loads(p.read_text())["files"]
            for p in sorted((root / "points").glob("*.ktrace/manifest.json"))}


def test_pool_and_ray_give_identical_points(tmp_path, ray_session, gemm_spec):
    pool, on_ray = tmp_path / "pool", tmp_path / "ray"
    a = run_sweep(gemm_spec, pool, workers=2)
    b = run_sweep(gemm_spec, on_ray, ray="")
    assert (a.engine, b.engine) == ("local", "ray") and a.ok == b.ok == 4
    assert ray.is_initialized()  # the module's session was used, not replaced
    assert points_without_walls(pool).equals(points_without_walls(on_ray))
    # the points differing only in hardware were retimed on Ray too (from shipped bytes)
    assert points_without_walls(on_ray)["retimed_from"].null_count() == 2
    assert _manifests(pool) == _manifests(on_ray)  # byte-identical ops/tensors files
    assert sorted(p.name for p in (on_ray / "points").iterdir()) == sorted(
        p.name for p in (pool / "points").iterdir())


def test_failing_point_on_ray_fails_alone_and_resume_skips_it_once_fixed(tmp_path,
                                                                          ray_session,
                                                                          failing_spec):
    out = tmp_path / "F"
    summary = run_sweep(failing_spec, out, ray="")
    assert (summary.ok, summary.failed, summary.exit_code) == (1, 1, 1)
    pool = tmp_path / "P"
    run_sweep(failing_spec, pool, workers=2)
    assert points_without_walls(out).equals(points_without_walls(pool))
    again = run_sweep(failing_spec, out, ray="")
    assert (again.resumed, again.failed) == (1, 1)  # the ok point is kept, the failed retried


def test_a_workload_point_retimed_on_ray_from_shipped_files_is_the_pools(tmp_path,
                                                                         ray_session):
    """Ray workers share no filesystem: the retimed point's task carries its source run's
    folder, and its answer and launch traces are the local pool's bytes."""
    from kernbench.sweep import resolve_spec
    from tests.workload.test_workload import TINY

    spec = resolve_spec("llama3-70b", [*(f"{k}={v}" for k, v in TINY.items()),
                                       "hw.preset=ahbm-v2,ahbm-v3"])
    pool, on_ray = tmp_path / "pool", tmp_path / "ray"
    a, b = run_sweep(spec, pool, workers=2), run_sweep(spec, on_ray, ray="")
    assert (a.ok, a.retimed) == (b.ok, b.retimed) == (2, 1) and b.engine == "ray"
    assert points_without_walls(pool).equals(points_without_walls(on_ray))
    files = [{f.relative_to(root).as_posix(): f.read_bytes()
              for f in sorted((root / "points").rglob("*"))  # but each point's wall times
              if f.is_file() and f.name not in ("point.json", "timings.json")}
             for root in (pool, on_ray)]
    assert files[0] == files[1] and any(k.endswith("workload.json") for k in files[0])
