"""Parsing ``-p KEY=VAL`` command-line parameters into typed values.

With a factory, each value is typed by the factory's signature: the parameter's annotation
(``int``, ``float``, ``bool``, ``str``) or else the type of its default; otherwise (and for
``**kwargs``) the value is guessed: int, then float, then true/false, else the string.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from kernbench.errors import BadInputError

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _to_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in _TRUE or lowered in _FALSE:
        return lowered in _TRUE
    raise ValueError(text)


#: converters by type name (annotations may be strings under ``from __future__``)
CONVERTERS: dict[str, Callable[[str], Any]] = {
    "int": lambda t: int(t, 0), "float": float, "bool": _to_bool, "str": str,
}


def parse_value(text: str) -> Any:
    """int, then float, then true/false, else the string itself."""
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    return text


def _type_name(param: inspect.Parameter) -> str | None:
    ann = param.annotation
    if ann is not inspect.Parameter.empty:
        name = ann if isinstance(ann, str) else getattr(ann, "__name__", None)
        if name in CONVERTERS:
            return name
    default = param.default
    if default is not inspect.Parameter.empty and default is not None:
        name = type(default).__name__
        return name if name in CONVERTERS else None
    return None


def param_types(factory: Callable[..., Any]) -> dict[str, str | None]:
    """The factory's keyword-passable parameters and their type names (None: untyped)."""
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return {}
    return {n: _type_name(p) for n, p in sig.parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def parse_params(items: tuple[str, ...] | list[str],
                 factory: Callable[..., Any] | None = None) -> dict[str, Any]:
    """``["n=4096", "stream=lazy"]`` -> ``{"n": 4096, "stream": "lazy"}``."""
    types = param_types(factory) if factory is not None else {}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if sep and key.startswith("hw."):
            raise BadInputError(f"parameter {item!r}: hardware fields are not case parameters; "
                                "record on a TOML file of fields with --hw FILE (or sweep them "
                                "with kernbench sweep -p hw.FIELD=V1,V2)")
        if not sep or not key.isidentifier():
            raise BadInputError(f"parameter {item!r} is not KEY=VALUE")
        want = types.get(key)
        if want is None:
            out[key] = parse_value(value)
            continue
        try:
            out[key] = CONVERTERS[want](value)
        except ValueError:
            raise BadInputError(f"parameter {key} expects {want}, got {value!r}") from None
    return out
