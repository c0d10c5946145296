"""Reading a user's TOML file (hardware, rules, sweep spec): one line naming the file on error."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from kernbench.errors import BadInputError


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The parsed TOML at ``path``; BadInputError naming ``what`` and the file otherwise."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text())
    except OSError as exc:
        raise BadInputError(f"{what} {str(path)!r}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{what} {str(path)!r} is not valid TOML: {exc}") from None
