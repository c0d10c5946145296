"""Parsing ``-p KEY=VAL`` command-line parameters into typed values."""

from __future__ import annotations

from typing import Any

from kernbench.errors import BadInputError


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


def parse_params(items: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """``["n=4096", "stream=lazy"]`` -> ``{"n": 4096, "stream": "lazy"}``."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise BadInputError(f"parameter {item!r} is not KEY=VALUE")
        out[key] = parse_value(value.strip())
    return out
