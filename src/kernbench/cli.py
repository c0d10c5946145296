"""The ``kernbench`` command line: thin click commands over the library."""

from __future__ import annotations

import functools
import gc
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import click

from kernbench.cli_workload import run_workload, workload_options
from kernbench.errors import BadInputError, KernbenchError, TraceFormatError


def _one_line(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a KernbenchError into one line on stderr and exit code 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KernbenchError as exc:
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            click.echo(f"kernbench: {type(exc).__name__}: {msg}", err=True)
            sys.exit(2)

    return wrapper


#: this process is the ``kernbench`` command itself (not a test's or a caller's call)
_OWN_PROCESS = False


class _Kernbench(click.Group):
    """The command group. Called with no arguments (its arguments from sys.argv: the
    ``kernbench`` script, ``python -m kernbench.cli``) it is this process's own command,
    which may freeze what it imported (ADR-0680); called with arguments (tests, a caller's
    own process) it changes nothing about the process."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        global _OWN_PROCESS
        _OWN_PROCESS = not args and "args" not in kwargs
        try:
            return self.main(*args, **kwargs)
        finally:
            _OWN_PROCESS = False


@click.group(cls=_Kernbench)
@click.version_option(package_name="kernbench")
def main() -> None:
    """kernbench: record Triton-style kernels on a modelled accelerator, replay them on real
    numbers, and check, diff and report their traces."""


@main.command()
@_one_line
def cases() -> None:
    """List the built-in cases and their parameters."""
    from kernbench.kernels.registry import describe_cases

    click.echo(describe_cases())


@main.command()
@click.argument("case")
@click.option("-p", "--param", "params", multiple=True, metavar="KEY=VAL",
              help="A case parameter (repeatable), typed by the factory's signature.")
@click.option("--hw", default=None,
              help="Preset name or TOML file [default: ahbm-v2, or $KERNBENCH_HW].")
@click.option("-o", "--out", default=None, help="Trace directory [default: CASE.ktrace].")
@_one_line
def record(case: str, params: tuple[str, ...], hw: str | None, out: str | None) -> None:
    """Record CASE (a built-in name, or MODULE:FUNC, a case factory) into a trace directory."""
    from kernbench.kernels.registry import build_user_case
    from kernbench.record.recorder import record as do_record

    if _OWN_PROCESS:  # what is imported so far is never garbage (ADR-0680)
        gc.freeze()
    built = build_user_case(case, params)
    progress = programs = None
    shown: list[int] = []
    if sys.stderr.isatty():  # recordings past a second show how far they are on a terminal
        from kernbench.record.lowering.bounds import MAX_OPS_ENV, max_ops

        limit, started, state = max_ops(), time.monotonic(), [0, 0, 0]  # ops, done, grid

        def show() -> None:
            took = time.monotonic() - started
            if took >= 1.0:
                n, done, grid = state
                shown.append(n)
                ran = f"{done:,} of {grid:,} programs, " if grid else ""
                click.echo(f"\rrecording {case}: {ran}{n:,} ops, {n / took:,.0f} ops/s "
                           f"({n / limit:.0%} of {MAX_OPS_ENV}={limit:,})", err=True, nl=False)

        def progress(n: int) -> None:
            state[0] = n
            show()

        def programs(done: int, grid: int) -> None:  # programs that record little, too
            state[1], state[2] = done, grid
            show()
    try:
        trace = do_record(built, out or f"{built.name}.ktrace", hw=hw, progress=progress,
                          programs=programs)
    finally:
        if shown:  # end the progress line (before an error's one line, too)
            click.echo("", err=True)
    click.echo(f"recorded {case}: {trace.n_ops} ops, latency {trace.t_end_ps / 1e6:.3f} us "
               f"-> {trace.path}")


@main.command()
@click.argument("trace")
@click.option("--hw", required=True, help="Preset name or TOML file to time the stream on.")
@click.option("-o", "--out", required=True, help="Trace directory to write.")
@_one_line
def retime(trace: str, hw: str, out: str) -> None:
    """Time TRACE's recorded op stream again on other hardware, without its kernel."""
    import pyarrow as pa

    from kernbench.record.retime import retime as do_retime

    try:  # as ``_reads_trace``, without importing polars (a retime never needs it)
        got = do_retime(trace, hw, out)
    except (OSError, pa.ArrowException, ValueError, TypeError, KeyError, IndexError,
            OverflowError, RecursionError) as exc:
        msg = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise TraceFormatError(f"cannot read the trace ({type(exc).__name__}: {msg})"
                               ) from None
    was = got.manifest["retimed_from"]
    click.echo(f"retimed {trace}: {got.n_ops} ops, latency {was['t_end_ps'] / 1e6:.3f} us on "
               f"{was['hw']} -> {got.t_end_ps / 1e6:.3f} us on {got.manifest['hw']['name']} "
               f"-> {got.path}")


def _reads_trace(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A command reading traces: errors of the libraries underneath (a corrupt file that got
    past validation, an OS error, memory) are one line and exit 2, never a traceback.
    Apply inside ``_one_line``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import polars as pl
        import pyarrow as pa

        try:
            return fn(*args, **kwargs)
        except TraceFormatError:  # not a trace: a suite's directory is named as such
            from kernbench.sweep.builtin import refuse_suite

            for key in ("trace", "a", "b"):
                if key in kwargs:
                    refuse_suite(kwargs[key], fn.__name__)
            raise
        except (KernbenchError, click.exceptions.Exit, click.ClickException):
            raise
        except MemoryError:
            raise TraceFormatError("out of memory reading the trace; lower "
                                   "KERNBENCH_MAX_MEMORY_GB so it is refused up front") from None
        except (OSError, pa.ArrowException, pl.exceptions.PolarsError, ValueError,
                TypeError, KeyError, IndexError, OverflowError, RecursionError,
                pl.exceptions.PanicException) as exc:
            msg = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise TraceFormatError(f"cannot read the trace ({type(exc).__name__}: {msg})"
                                   ) from None

    return wrapper


def _emit(result: Any, as_json: bool = False) -> None:
    """Print an analysis report (table or JSON) and its warnings (stderr); exit with its
    code."""
    for line in getattr(result, "warnings", ()):
        click.echo(f"kernbench: warning: {line}", err=True)
    click.echo(result.to_json() if as_json else result.to_text(), nl=as_json)
    if result.exit_code:
        sys.exit(result.exit_code)


@main.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path())
@click.option("--case", "case", default=None, metavar="MODULE:FUNC",
              help="Case factory giving the reference [default: the built-in case].")
@click.option("--require-reference", is_flag=True,
              help="Exit 1 unless verified: no reference, or one that compared not every "
                   "output, fails too (for CI).")
@click.option("--threads", type=click.IntRange(min=1), default=None, metavar="N",
              help="BLAS threads in the replay process [default: 1].")
@_one_line
def replay(traces: tuple[str, ...], case: str | None, require_reference: bool,
           threads: int | None) -> None:
    """Replay TRACES on real numbers (Phase 2, in a child process); exit 1 if wrong.

    Several traces go through one warm replay worker, one line each (``TRACE: ...``); the
    exit code is the worst of theirs (1 wrong, 2 bad input or a crashed replay)."""
    from kernbench.replay import replay as do_replay
    from kernbench.replay.result import exit_code, summary

    if len(traces) == 1:  # progress when stderr is a tty; the verdict is all we read back
        result = do_replay(traces[0], case=case, threads=threads, outputs=False)
        click.echo(summary(result))
        sys.exit(exit_code(result, require_reference))
    from kernbench.replay.pool import ReplayPool

    worst = 0
    with ReplayPool() as pool:
        for trace in traces:
            try:
                result = do_replay(trace, case=case, threads=threads, outputs=False, pool=pool)
                line, code = summary(result), exit_code(result, require_reference)
            except KernbenchError as exc:
                msg = str(exc).splitlines()[0] if str(exc) else ""
                line, code = f"{type(exc).__name__}: {msg}", 2
            click.echo(f"{trace}: {line}")
            worst = max(worst, code)
    sys.exit(worst)


@main.command()
@click.argument("trace", type=click.Path())
@click.option("--rules", type=click.Path(), default=None, help="TOML file of [[rule]] tables.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_one_line
@_reads_trace
def check(trace: str, rules: str | None, as_json: bool) -> None:
    """Check a trace's (or every sweep point's) invariants and rules; exit 1 on a violation.

    Exit 1 also for a readable trace that breaks the format (the validator's findings are
    listed); exit 2 for one that cannot be read (corrupt file, wrong column types, sha256
    mismatch, over the size limit KERNBENCH_MAX_MEMORY_GB)."""
    from kernbench.analyze import check as run
    from kernbench.sweep import is_sweep
    if is_sweep(trace):  # a sweep: every point, naming the failing ones
        from kernbench.sweep.query import sweep_check

        return _emit(sweep_check(trace, rules), as_json)

    _emit(run(trace, rules=rules), as_json)


@main.command()
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@click.option("--fail-on", "fail_on", multiple=True, metavar="KEY=±X%|±Xns",
              help="Exit 1 if metric KEY changed by more than X% or, for a time, an amount "
                   "with a unit ps/ns/us (repeatable).")
@click.option("--pair", type=click.Choice(["id", "params"]), default=None,
              help="Sweeps: pair points by id (same case, parameters and hardware) or by case "
                   "and parameters whatever the hardware [default: id].")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_one_line
@_reads_trace
def diff(a: str, b: str, fail_on: tuple[str, ...], pair: str | None, as_json: bool) -> None:
    """Compare trace A (before) with trace B (after), or two sweeps point by point.

    Exit 1 if a --fail-on threshold is exceeded, or if --fail-on is given and no point of
    two sweeps was compared."""
    from kernbench.analyze import diff as run
    from kernbench.sweep import is_sweep
    if is_sweep(a) or is_sweep(b):
        from kernbench.sweep.diff import sweep_diff

        return _emit(sweep_diff(a, b, fail_on=fail_on, pair=pair or "id"), as_json)
    if pair is not None:
        raise BadInputError(f"--pair {pair}: only two sweeps pair points; {a!r} and {b!r} "
                            "are traces")
    _emit(run(a, b, fail_on=list(fail_on)), as_json)


@main.command()
@click.argument("trace", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--sort", default=None, metavar="METRIC", help="Sweeps: best points first.")
@click.option("--pareto", default=None, metavar="M1,M2",
              help="Sweeps: only the Pareto front of these metrics.")
@click.option("--html", "html_out", default=None, type=click.Path(), metavar="FILE.html",
              help="Write a self-contained HTML report with pictures instead.")
@_one_line
@_reads_trace
def report(trace: str, as_json: bool, sort: str | None, pareto: str | None,
           html_out: str | None) -> None:
    """The metrics of a trace (or the points of a sweep), as a table, JSON, or an HTML page
    with pictures."""
    from kernbench.sweep.builtin import suite_parts

    if html_out is not None:
        from kernbench.plot.html import html_report

        return _emit(html_report(trace, html_out), as_json)
    from kernbench.analyze import report as run
    from kernbench.sweep import is_sweep

    parts = suite_parts(trace)
    if parts:  # a suite's directory: each sweep's report
        from kernbench.sweep.report import suite_report

        return _emit(suite_report(parts, trace, sort=sort, pareto=pareto), as_json)
    if is_sweep(trace) or sort or pareto:
        from kernbench.sweep.report import sweep_report

        return _emit(sweep_report(trace, sort=sort, pareto=pareto), as_json)

    _emit(run(trace), as_json)


@main.command()
@click.argument("trace", type=click.Path())
@click.option("-o", "--out", required=True, type=click.Path(), help="FILE.png, .svg or .pdf.")
@click.option("--access", default=None, metavar="TENSOR",
              help="Draw which program / kernel line touched each element of this HBM "
                   "tensor, and how often.")
@_one_line
@_reads_trace
def plot(trace: str, out: str, access: str | None) -> None:
    """Draw a trace (engine timeline, scratch, stalls by line, roofline) or a sweep
    (metrics against parameters, Pareto front)."""
    from kernbench.plot import plot as run
    _emit(run(trace, out, access=access))


@main.command()
@click.argument("trace", type=click.Path())
@click.option("-o", "--out", required=True, type=click.Path(), help="Output .json file.")
@_one_line
@_reads_trace
def export(trace: str, out: str) -> None:
    """Write a Perfetto (Chrome JSON) timeline of a trace."""
    from kernbench.analyze import export_perfetto
    _emit(export_perfetto(trace, out))


@main.command()
@click.argument("trace", type=click.Path())
@click.argument("query")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_one_line
@_reads_trace
def sql(trace: str, query: str, as_json: bool) -> None:
    """Run SQL over the tables ops, operands, tensors and values (a sweep: points, ops)."""
    from kernbench.analyze import sql as run
    from kernbench.sweep import is_sweep
    if is_sweep(trace):
        from kernbench.sweep.query import sweep_sql

        return _emit(sweep_sql(trace, query), as_json)

    _emit(run(trace, query), as_json)


@main.command()
@click.argument("spec")
@click.option("-p", "--param", "params", multiple=True, metavar="KEY=V1,V2",
              help="Sweep a parameter over values (repeatable; hw.FIELD for hardware).")
@click.option("-o", "--out", required=True, type=click.Path(), help="Sweep directory.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Local worker processes [default: one per core].")
@click.option("--ray", "ray", is_flag=False, flag_value="", default=None, metavar="[ADDRESS]",
              help="Run the points as Ray tasks: a local Ray, or join the cluster at ADDRESS.")
@click.option("--replay/--no-replay", default=None, help="Replay every point (Phase 2).")
@click.option("--check/--no-check", default=None, help="Check every point's invariants.")
@click.option("--rules", type=click.Path(), default=None, help="Rules for the check stage.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@_one_line
def sweep(spec: str, params: tuple[str, ...], out: str, workers: int | None, ray: str | None,
          replay: bool | None, check: bool | None, rules: str | None, as_json: bool) -> None:
    """Run every point of SPEC (a .toml file, a built-in spec or a case name with -p
    K=V1,V2) into the sweep directory OUT; re-running resumes. Exit 1 if a point failed."""
    from kernbench.sweep import run_sweep
    from kernbench.sweep.builtin import plan

    tty, code = sys.stderr.isatty(), 0
    for one, where in plan(spec, out, params, replay, check, rules):  # a suite: several
        summary = run_sweep(one, where, workers, ray, progress=(
            lambda p: click.echo("\r" + p.to_text(), err=True, nl=False)) if tty else None)
        if tty:
            click.echo("", err=True)
        click.echo(summary.to_json() if as_json else summary.to_text(), nl=as_json)
        code = max(code, summary.exit_code)
    sys.exit(code)


@main.command()
@click.option("--quick", "mode", flag_value="quick", default=True,
              help="The quick panel (<= 60 s on 2 cores) [default].")
@click.option("--full", "mode", flag_value="full", help="The full headline panel.")
@click.option("-o", "--out", default=None, type=click.Path(),
              help="Also write panel.parquet, panel.csv and panel.png into this folder.")
@click.option("--best", default=None, type=click.Path(), metavar="SWEEP",
              help="Only show the best point of each sweep in SWEEP (e.g. the output of "
                   "`kernbench sweep milestone`).")
@click.option("--hw", default=None, metavar="NAME|FILE",
              help="Record on this preset or TOML file, and the headline rows also on "
                   "ahbm-v1, side by side, when it is another [default: ahbm-v2, or "
                   "$KERNBENCH_HW, as record].")
@_one_line
def panel(mode: str, out: str | None, best: str | None, hw: str | None) -> None:
    """The milestone-gqa-headline panel: GQA decode/prefill/ring configurations."""
    from kernbench.bench.panel import format_best, format_panel, run_panel

    if best is not None:
        return click.echo(format_best(best))

    frame = run_panel(full=mode == "full", out=out,
                      progress=lambda m: click.echo(m, err=True), hw=hw)
    click.echo(format_panel(frame))


@main.command()
@workload_options
@_one_line
def workload(**options: Any) -> None:
    """Record every kernel of MODEL's decoder layer (llama3-70b) in order, tensor parallel
    over the PEs: per kernel its latency, share, binding part, efficiency and HBM bytes; per
    layer; per model the time per token and tokens/s (decode) or to first token (prefill)."""
    run_workload(**options)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--quick", is_flag=True, help="Smaller workloads (a smoke run, not the figures).")
@_one_line
def bench(as_json: bool, quick: bool) -> None:
    """Measure kernbench itself: record/replay throughput, trace size, peak memory."""
    from kernbench.bench.run import run_bench

    result = run_bench(quick=quick, progress=None if as_json else click.echo)
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
    else:
        width = max(map(len, result))
        for k, v in sorted(result.items()):
            click.echo(f"{k:<{width}}  {v}")


if __name__ == "__main__":  # pragma: no cover
    main()
