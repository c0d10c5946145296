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

    trace = do_record(build_case(case, parse_params(params)), out or f"{case}.ktrace", hw=hw)
    click.echo(f"recorded {case}: {trace.n_ops} ops, latency {trace.t_end_ps / 1e6:.3f} us "
               f"-> {trace.path}")


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
