"""``kernbench workload``: its options and its body, thin over ``kb.Workload`` (the command
itself is registered in ``cli.py``, which turns errors into one line and exit 2)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kernbench.errors import BadInputError


def workload_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed((
        click.argument("model"),
        click.option("--phase", type=click.Choice(["decode", "prefill"]), default="decode",
                     show_default=True, help="A decode step (one token per request) or a "
                                             "prefill (the whole prompt)."),
        click.option("-p", "--param", "params", multiple=True, metavar="KEY=VAL",
                     help="batch, context, attention (contiguous|paged), or a shape field "
                          "(hidden, heads, kv_heads, head_dim, ffn, layers, vocab) to reduce "
                          "the model (repeatable)."),
        click.option("--hw", default=None,
                     help="Preset name or TOML file [default: ahbm-v2, or $KERNBENCH_HW]."),
        click.option("-o", "--out", default=None, type=click.Path(),
                     help="Keep every kernel's trace (and its verified slice) in this folder."),
        click.option("--like", default=None, type=click.Path(), metavar="DIR",
                     help="A run of this workload on other hardware (its -o DIR): launches "
                          "with the same parameters are retimed from it, not recorded."),
        click.option("--verify/--no-verify", default=True, show_default=True,
                     help="Replay each kernel's reduced slice against numpy and check it."),
        click.option("--plot", "plot_out", default=None, type=click.Path(),
                     metavar="FILE.png|.svg", help="Also draw the layer."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object."),
    )):
        fn = option(fn)
    return fn


def parse_workload_params(items: tuple[str, ...]) -> dict[str, Any]:
    """``["batch=8", "attention=paged"]`` -> ``{"batch": 8, "attention": "paged"}``
    (``kb.Workload`` checks the names and types)."""
    from kernbench.case.params import parse_value

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise BadInputError(f"parameter {item!r} is not KEY=VALUE")
        out[key.strip()] = parse_value(value.strip())
    return out


def run_workload(model: str, phase: str, params: tuple[str, ...], hw: str | None,
                 out: str | None, like: str | None, verify: bool, plot_out: str | None,
                 as_json: bool) -> None:
    """Record the workload, print its table (or JSON), draw it; exit 1 if a slice failed."""
    from kernbench.workload import Workload

    if plot_out is not None:
        from kernbench.plot import FORMATS

        if not any(plot_out.endswith(s) for s in FORMATS):
            raise BadInputError(f"--plot {plot_out!r}: the picture is one of "
                                f"{', '.join(FORMATS)}")
    work = Workload(model, phase=phase, hw=hw, **parse_workload_params(params))
    tty = sys.stderr.isatty()
    if like is not None and not Path(like).is_dir():
        raise BadInputError(f"--like {like!r} is not a folder of a workload run")
    result = work.run(out, verify=verify, like=like, progress=(
        lambda name: click.echo(f"\rrecording {name:<16}", err=True, nl=False)) if tty else None)
    if tty:
        click.echo("", err=True)
    body = result.to_json()
    click.echo(json.dumps(body, sort_keys=True) if as_json else result.table())
    if plot_out is not None:
        from kernbench.plot import save
        from kernbench.plot.workload_figure import workload_figure

        save(workload_figure(body), plot_out)
    if verify and not body["verified"]:
        sys.exit(1)
