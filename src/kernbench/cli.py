"""The ``kernbench`` command line: thin click commands over the library."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from kernbench.errors import KernbenchError


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


@click.group()
@click.version_option(package_name="kernbench")
def main() -> None:
    """kernbench: record Triton-style kernels on a modelled accelerator, replay them on real
    numbers, and check, diff and report their traces."""


@main.command()
@_one_line
def cases() -> None:
    """List the built-in cases and their parameters."""
    from kernbench.case import describe_cases

    click.echo(describe_cases())


@main.command()
@click.argument("case")
@click.option("-p", "--param", "params", multiple=True, metavar="KEY=VAL",
              help="A case parameter (repeatable).")
@click.option("--hw", default="ahbm-v1", show_default=True, help="Preset name or TOML file.")
@click.option("-o", "--out", default=None, help="Trace directory [default: CASE.ktrace].")
@_one_line
def record(case: str, params: tuple[str, ...], hw: str, out: str | None) -> None:
    """Record CASE (Phase 1) into a trace directory."""
    from kernbench.case import build_case
    from kernbench.params import parse_params
    from kernbench.record.runner import record as do_record

    progress = None
    if sys.stderr.isatty():  # long recordings show how far they are on a terminal
        def progress(n: int) -> None:
            click.echo(f"\rrecording {case}: {n:,} ops", err=True, nl=False)
    trace = do_record(build_case(case, parse_params(params)), out or f"{case}.ktrace", hw=hw,
                      progress=progress)
    if progress is not None:
        click.echo("", err=True)
    click.echo(f"recorded {case}: {trace.n_ops} ops, latency {trace.t_end_ps / 1e6:.3f} us "
               f"-> {trace.path}")


def _emit(result: Any, as_json: bool = False) -> None:
    """Print an analysis report (table or JSON) and exit with its code."""
    click.echo(result.to_json() if as_json else result.to_text(), nl=as_json)
    if result.exit_code:
        sys.exit(result.exit_code)


@main.command()
@click.argument("trace", type=click.Path())
@click.option("--case", "case", default=None, metavar="MODULE:FUNC",
              help="Case factory giving the reference [default: the built-in case].")
@click.option("--threads", type=click.IntRange(min=1), default=None, metavar="N",
              help="BLAS threads in the replay process [default: 1].")
@_one_line
def replay(trace: str, case: str | None, threads: int | None) -> None:
    """Replay TRACE on real numbers (Phase 2, in a child process); exit 1 if wrong."""
    import os

    from kernbench.replay import replay as do_replay
    from kernbench.replay.__main__ import summary

    if threads is not None:  # the child process reads it (kernbench.replay.threads)
        os.environ["KERNBENCH_REPLAY_THREADS"] = str(threads)
    if sys.stderr.isatty():  # the child shows progress on this terminal
        os.environ["KERNBENCH_PROGRESS"] = "tty"
    result = do_replay(trace, case=case)
    click.echo(summary(result))
    sys.exit(0 if result.ok else 1)


@main.command()
@click.argument("trace", type=click.Path())
@click.option("--rules", type=click.Path(), default=None, help="TOML file of [[rule]] tables.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_one_line
def check(trace: str, rules: str | None, as_json: bool) -> None:
    """Check a trace's invariants (and rules); exit 1 on a violation."""
    from kernbench.analyze import check as run

    _emit(run(trace, rules=rules), as_json)


@main.command()
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@click.option("--fail-on", "fail_on", multiple=True, metavar="KEY=±X%",
              help="Exit 1 if metric KEY changed by more than X% (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_one_line
def diff(a: str, b: str, fail_on: tuple[str, ...], as_json: bool) -> None:
    """Compare trace A (before) with trace B (after)."""
    from kernbench.analyze import diff as run

    _emit(run(a, b, fail_on=list(fail_on)), as_json)


@main.command()
@click.argument("trace", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_one_line
def report(trace: str, as_json: bool) -> None:
    """The metrics of a trace, as a table (or JSON)."""
    from kernbench.analyze import report as run

    _emit(run(trace), as_json)


@main.command()
@click.argument("trace", type=click.Path())
@click.option("-o", "--out", required=True, type=click.Path(), help="Output .json file.")
@_one_line
def export(trace: str, out: str) -> None:
    """Write a Perfetto (Chrome JSON) timeline of a trace."""
    from kernbench.analyze import export_perfetto

    _emit(export_perfetto(trace, out))


@main.command()
@click.argument("trace", type=click.Path())
@click.argument("query")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_one_line
def sql(trace: str, query: str, as_json: bool) -> None:
    """Run SQL over the tables ops, operands, tensors and values."""
    from kernbench.analyze import sql as run

    _emit(run(trace, query), as_json)


@main.command()
@click.option("--quick", "mode", flag_value="quick", default=True,
              help="The quick panel (<= 60 s on 2 cores) [default].")
@click.option("--full", "mode", flag_value="full", help="The full headline panel.")
@click.option("-o", "--out", default=None, type=click.Path(),
              help="Also write panel.parquet and panel.csv into this folder.")
@_one_line
def panel(mode: str, out: str | None) -> None:
    """The milestone-gqa-headline panel: GQA decode/prefill/ring configurations."""
    from kernbench.kernels.panel import format_panel, run_panel

    frame = run_panel(full=mode == "full", out=out,
                      progress=lambda m: click.echo(m, err=True))
    click.echo(format_panel(frame))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--quick", is_flag=True, help="Smaller workloads (a smoke run, not the figures).")
@_one_line
def bench(as_json: bool, quick: bool) -> None:
    """Measure kernbench itself: record/replay throughput, trace size, peak memory."""
    from kernbench.bench import run_bench

    result = run_bench(quick=quick, progress=None if as_json else click.echo)
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
    else:
        width = max(map(len, result))
        for k, v in sorted(result.items()):
            click.echo(f"{k:<{width}}  {v}")


if __name__ == "__main__":  # pragma: no cover
    main()
