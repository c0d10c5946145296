"""Where the ``kernbench`` command meets errors and output: a KernbenchError is one line and
exit 2, a library's error while reading a trace is a TraceFormatError (never a traceback),
and a report is printed with its warnings and exit code. Only the command line uses these."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click

from kernbench.errors import KernbenchError, TraceFormatError


def one_line(fn: Callable[..., Any]) -> Callable[..., Any]:
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


def _library_errors() -> tuple[type[BaseException], ...]:
    """What the libraries under a trace command raise on a file that got past validation:
    Python's own, and Arrow's and polars' when they are loaded (a command that never imports
    polars, such as ``retime``, cannot meet its errors)."""
    errors: list[type[BaseException]] = [OSError, ValueError, TypeError, KeyError, IndexError,
                                         OverflowError, RecursionError]
    if (pa := sys.modules.get("pyarrow")) is not None:
        errors.append(pa.ArrowException)
    if (pl := sys.modules.get("polars")) is not None:
        errors += [pl.exceptions.PolarsError, pl.exceptions.PanicException]
    return tuple(errors)


def reads_trace(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A command reading traces: errors of the libraries underneath (a corrupt file that got
    past validation, an OS error, memory) are one line and exit 2, never a traceback.
    Apply inside ``one_line``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
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
        except BaseException as exc:
            if not isinstance(exc, _library_errors()):
                raise
            msg = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise TraceFormatError(f"cannot read the trace ({type(exc).__name__}: {msg})"
                                   ) from None

    return wrapper


def emit(result: Any, as_json: bool = False) -> None:
    """Print an analysis report (table or JSON) and its warnings (stderr); exit with its
    code."""
    for line in getattr(result, "warnings", ()):
        click.echo(f"kernbench: warning: {line}", err=True)
    click.echo(result.to_json() if as_json else result.to_text(), nl=as_json)
    if result.exit_code:
        sys.exit(result.exit_code)
