"""kernbench in a kernel author's own test suite: a pytest plugin (entry point ``pytest11``).

Installed with kernbench, it gives every pytest run

* the fixture ``kb_record``: ``kb_record(case, **params)`` records a case (a ``kb.Case``, a
  case factory, ``"module:function"`` or a built-in case name) into ``tmp_path`` and returns
  the ``kb.Trace``;
* ``assert_check_ok(trace, rules=None)``: the built-in invariants (and a rules TOML) hold;
* ``assert_replay_ok(trace, case=None)``: Phase 2 replays the trace and its status is
  ``verified`` (every output matches the case's reference), on the session's warm replay
  worker (the session-scoped fixture ``kb_replay_pool``, a ``kb.ReplayPool`` ended with the
  session);
* ``assert_no_regression(golden, trace, latency="+1%", **more)``: the trace is no worse than
  the golden trace at ``golden``; ``pytest --kb-update-goldens`` (re)writes the golden instead.

Failures are ``pytest.fail`` with kernbench's own report (no traceback into kernbench). This
module imports kernbench lazily, so the plugin costs nothing in a session that does not use it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

UPDATE_OPTION = "--kb-update-goldens"
#: set by ``pytest --kb-update-goldens`` (or the environment variable of the same meaning)
UPDATE_ENV = "KB_UPDATE_GOLDENS"
#: one entry per configured pytest session, innermost last (a session run in-process by
#: ``pytester`` stacks on the one running it): its update flag and its replay pool, started
#: by the first replay (``_session_pool``) and closed with that session only
_sessions: list[dict[str, Any]] = []
_OUTSIDE: dict[str, Any] = {"update": False, "pool": None}  # used without pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kernbench")
    group.addoption(UPDATE_OPTION, action="store_true", default=False,
                    help="kernbench: rewrite the golden traces assert_no_regression compares "
                         "against (from this run's traces) instead of comparing.")


def pytest_configure(config: pytest.Config) -> None:
    _sessions.append({"update": bool(config.getoption("kb_update_goldens", False)) or (
        os.environ.get(UPDATE_ENV, "") not in ("", "0")), "pool": None})


def pytest_unconfigure(config: pytest.Config) -> None:
    pool = _sessions.pop()["pool"] if _sessions else None
    if pool is not None:
        pool.close()


def _session() -> dict[str, Any]:
    """The innermost pytest session's state (``_OUTSIDE`` when used without pytest)."""
    return _sessions[-1] if _sessions else _OUTSIDE


def _session_pool() -> Any:
    """The warm replay worker(s) of this session, started on first use."""
    session = _session()
    pool = session["pool"]
    if pool is None:
        from kernbench.replay.pool import ReplayPool

        pool = session["pool"] = ReplayPool()
    return pool


@pytest.fixture(scope="session")
def kb_replay_pool() -> Any:
    """The session's ``kb.ReplayPool``: ``kb.replay(path, pool=kb_replay_pool)`` replays on
    a warm worker (the one ``assert_replay_ok`` uses)."""
    return _session_pool()


def updating_goldens() -> bool:
    """Whether this session rewrites goldens (``--kb-update-goldens``)."""
    return bool(_session()["update"])


def _trace(trace: Any) -> Any:
    from kernbench.analyze.frames import open_trace

    return open_trace(trace)


def _path(trace: Any) -> Path:
    """Where a trace argument lives: a ``kb.Trace``'s directory, or the path as given."""
    path = getattr(trace, "path", trace)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"expected a kb.Trace or a trace path, got {trace!r}")
    return Path(path)


def _case(case: Any, params: dict[str, Any]) -> Any:
    """A ``kb.Case`` from a Case, a factory, ``"module:function"`` or a registered name."""
    from kernbench.case import Case
    from kernbench.kernels.registry import build_case
    from kernbench.replay.verdict import load_factory

    if isinstance(case, Case):
        if params:
            raise TypeError("kb_record: params are for case factories, not a built kb.Case")
        return case
    if isinstance(case, str) and ":" in case:
        return build_case(case, params, factory=load_factory(case))
    if isinstance(case, str):
        return build_case(case, params)
    if callable(case):
        return build_case(getattr(case, "__name__", "case"), params, factory=case)
    raise TypeError(f"kb_record: cannot record {case!r}; pass a kb.Case, a case factory, "
                    "'module:function' or a built-in case name")


def _unique(used: set[str], name: str | None, case_name: str) -> str:
    """The trace directory name of one ``kb_record`` call: ``name`` as given (it must not
    repeat within the test), else the case name, numbered ``-2``, ``-3``... when it repeats."""
    if name is not None:
        if name in used:
            raise ValueError(f"kb_record: name={name!r} was already recorded in this test; "
                             "give each recording its own name")
        used.add(name)
        return name
    stem, k = case_name, 2
    while stem in used:
        stem, k = f"{case_name}-{k}", k + 1
    used.add(stem)
    return stem


@pytest.fixture
def kb_record(tmp_path: Path) -> Callable[..., Any]:
    """Record a case into ``tmp_path``: ``kb_record(case, hw=None, name=None, **params)``
    returns the ``kb.Trace``, at ``tmp_path / f"{name or case.name}.ktrace"``. Every call of
    one test records into its own directory: a repeated case name is numbered (``scale-2``),
    a repeated explicit ``name=`` is an error."""
    used: set[str] = set()

    def record(case: Any, *, hw: Any = None, name: str | None = None,
               **params: Any) -> Any:
        from kernbench.record.recorder import record as do_record

        built = _case(case, params)
        return do_record(built, tmp_path / f"{_unique(used, name, built.name)}.ktrace", hw=hw)

    return record


def _fail(text: str) -> None:
    __tracebackhide__ = True
    pytest.fail(text, pytrace=False)


def assert_check_ok(trace: Any, rules: str | Path | None = None) -> None:
    """Fail unless every built-in invariant (and every rule in ``rules``) holds."""
    __tracebackhide__ = True
    from kernbench.analyze.check import check

    rep = check(_trace(trace), rules=rules)
    if rep.exit_code:
        _fail(f"kernbench check failed:\n{rep.to_text()}")


def assert_replay_ok(trace: Any, case: Any = None, pool: Any = None) -> Any:
    """Replay ``trace`` (Phase 2, in an isolated child: a warm worker of ``pool``, by default
    the session's) and fail unless it is ``verified``: the case's reference compared every
    output and each matched (a replay that compared nothing fails as "verified nothing").
    ``case``: a factory or ``"module:function"`` for cases that are not built in. Returns the
    ``kb.ReplayResult``."""
    __tracebackhide__ = True
    from kernbench.replay import replay
    from kernbench.replay.__main__ import summary

    path = _path(trace)
    res = replay(path, case=case, pool=pool if pool is not None else _session_pool())
    if res.status == "unverified":
        _fail(f"kernbench replay of {path} verified nothing: {summary(res)}")
    if not res.verified:
        _fail(f"kernbench replay of {path}: {summary(res)}")
    return res


def _write_golden(trace: Any, golden: Path) -> None:
    from kernbench.trace import atomic_dir

    src = _path(trace)
    if src.resolve() == golden.resolve():
        return  # the golden is this very trace
    with atomic_dir(golden) as tmp:
        for item in sorted(Path(src).iterdir()):
            if item.is_file():
                shutil.copy2(item, tmp / item.name)


def assert_no_regression(golden: Any, trace: Any, latency: str | None = "+1%",
                         fail_on: Iterable[str] = (), **thresholds: str) -> Any:
    """Fail if ``trace`` regressed against the golden trace ``golden`` (each a ``kb.Trace``
    or a path).

    ``latency`` (default ``"+1%"``) and every keyword (``dma_read_bytes="+0%"``,
    ``scratch_peak_bytes="+5%"``, any metric of ``kb.analyze.metrics``) are the most each
    metric may grow; ``fail_on`` takes ``kernbench diff --fail-on`` strings as they are.
    Under ``pytest --kb-update-goldens`` the golden is (re)written from ``trace`` instead;
    a missing golden fails and says so. Returns the ``DiffReport`` (None when updating).
    """
    __tracebackhide__ = True
    from kernbench.analyze.diff import diff

    golden = _path(golden)
    if updating_goldens():
        _write_golden(trace, golden)
        return None
    if not (golden / "manifest.json").is_file():
        _fail(f"no golden trace at {golden}; record it with `pytest {UPDATE_OPTION}`")
    specs = [*([f"latency={latency}"] if latency else []),
             *(f"{k}={v}" for k, v in thresholds.items()), *fail_on]
    rep = diff(golden, _trace(trace), fail_on=specs)
    if rep.exit_code:
        _fail(f"kernbench: {_path(trace)} regressed against the golden {golden} "
              f"({', '.join(specs)}); if intended, run `pytest {UPDATE_OPTION}`\n"
              f"{rep.to_text()}")
    return rep


__all__ = ["kb_record", "kb_replay_pool", "assert_check_ok", "assert_replay_ok",
           "assert_no_regression", "updating_goldens"]
