"""The built-in case registry: the kernel library's cases by name, built from parameters.

The built-in kernels register their factories with ``kernbench.case.register_case`` when
they are imported; that happens on the first look-up of a name (``registry()``), not when this
module loads, so building a user's factory case (``record MODULE:FUNC``) never imports them
(ADR-0635)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import Any

from kernbench.case.case import Case, CaseFactory, factory_params, json_params, registered
from kernbench.errors import BadInputError, KernbenchError, closest


def registry() -> dict[str, CaseFactory]:
    """Every registered case factory by name, the built-in ones included (imported here, on
    first use: importing them registers them)."""
    from kernbench.kernels import examples, flash, gqa, ring, serving, streaming  # noqa: F401

    return registered()


def _check_names(name: str, factory: CaseFactory, params: Mapping[str, Any]) -> None:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return
    known = [n for n, p in sig.parameters.items()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise BadInputError(f"case {name!r} has no parameter(s) {unknown}"
                            f"{closest(unknown[0], known)}; known: {sorted(known)}")


def build_case(name: str, params: Mapping[str, Any] | None = None,
               factory: CaseFactory | None = None, spec: str | None = None) -> Case:
    """Build a registered case (or ``factory``'s, named ``spec``) from its parameters."""
    builtin = factory is None
    if factory is None:
        reg = registry()
        if name not in reg:
            raise BadInputError(f"unknown case {name!r}{closest(name, reg)}; known: "
                                f"{', '.join(sorted(reg))}")
        factory = reg[name]
    params = dict(params or {})
    _check_names(name, factory, params)
    known = factory_params(factory)
    for key, value in params.items():
        default = known.get(key)
        want = type(default)
        ok = (isinstance(value, want) and not (want is int and isinstance(value, bool))) or (
            want is float and isinstance(value, int) and not isinstance(value, bool))
        if default is not None and not ok:
            raise BadInputError(f"case {name!r} parameter {key} expects {want.__name__} "
                                f"(default {default!r}), got {value!r}")
    try:
        case = factory(**params)
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise BadInputError(f"case {name!r} rejected its parameters {params}: {exc}") from None
    except KernbenchError:
        raise
    except Exception as exc:  # noqa: BLE001 - a user's factory; one line, not a traceback
        raise BadInputError(f"case {name!r}: the factory raised {type(exc).__name__}: {exc}"
                            ) from None
    if not isinstance(case, Case):
        raise BadInputError(f"case {name!r}: the factory returned {type(case).__name__}, "
                            "not a kernbench Case")
    full = json_params({**known, **params})
    if builtin:
        return dataclasses.replace(case, case_params=full, builtin=True)
    return dataclasses.replace(case, case_params=full, builtin=False,
                               factory=spec or f"{factory.__module__}:{factory.__qualname__}")


def build_user_case(case: str, items: tuple[str, ...] | list[str]) -> Case:
    """``kernbench record CASE|MODULE:FUNC -p K=V``: the built-in case or the user's factory
    (imported from this process's sys.path, then the current directory), built with the
    ``-p`` values typed by the factory's signature."""
    from kernbench.case.factory import load_user_factory
    from kernbench.case.params import parse_params

    if ":" not in case:
        return build_case(case, parse_params(items, registry().get(case)))
    factory = load_user_factory(case)
    return build_case(case, parse_params(items, factory), factory=factory, spec=case)


def as_case(case: Any, params: Mapping[str, Any] | None = None, who: str = "kb.record"
            ) -> Case:
    """A ``kb.Case`` from what a user hands ``kb.record`` or the ``kb_record`` fixture: a
    Case (as it is), a built-in case name, ``"module:function"`` or a case factory (the
    last three built with ``params``, typed by the factory's defaults)."""
    params = dict(params or {})
    if isinstance(case, Case):
        if params:
            raise BadInputError(f"{who}: parameters {sorted(params)} are for a case factory or "
                                f"a case name; the kb.Case {case.name!r} is built already")
        return case
    if isinstance(case, str) and ":" in case:
        from kernbench.case.factory import load_user_factory

        return build_case(case, params, factory=load_user_factory(case), spec=case)
    if isinstance(case, str):
        return build_case(case, params)
    if callable(case):
        return build_case(getattr(case, "__name__", "case"), params, factory=case)
    raise BadInputError(f"{who}: cannot record {case!r} ({type(case).__name__}); pass a "
                        "kb.Case, a built-in case name, 'module:function' or a case factory")


#: the width ``kernbench cases`` wraps its text to
CASES_WIDTH = 96


def first_sentence(doc: str | None) -> str:
    """The first sentence of a docstring's first paragraph, whole (a period inside
    parentheses does not end it), with RST literals (````x````) shown as ``x``."""
    para = " ".join((doc or "").strip().split("\n\n")[0].split()).replace("``", "")
    depth = 0
    for i, ch in enumerate(para):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch in ".!?" and depth <= 0 and (i + 1 == len(para) or para[i + 1] == " "):
            return para[:i + 1]
    return para


def describe_cases(width: int = CASES_WIDTH) -> str:
    """One block per built-in case: its name and the first sentence of its doc (wrapped,
    never cut), then its parameters with defaults."""
    import textwrap

    reg = registry()
    pad = max(map(len, reg)) + 2
    lines = []
    for name, factory in sorted(reg.items()):
        lines.append(textwrap.fill(first_sentence(factory.__doc__), width,
                                   initial_indent=name.ljust(pad), subsequent_indent=" " * pad,
                                   break_long_words=False, break_on_hyphens=False).rstrip())
        params = factory_params(factory)
        if params:
            lines.append(textwrap.fill("  ".join(f"{k}={v}" for k, v in params.items()), width,
                                       initial_indent="    ", subsequent_indent="    ",
                                       break_long_words=False, break_on_hyphens=False))
    return "\n".join(lines)
