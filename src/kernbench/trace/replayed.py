"""Whether a trace's ``replay/`` is a replay of the trace as it is now (ADR-0538).

Replay writes into ``verdict.json`` the sha256 of every data file it replayed (``files``,
as the manifest lists them and the opening verified). A reader of ``replay/`` (``diff``,
``sql``, ``report``, the notebook reprs, ``load_result``) compares them with the manifest's
current ``files``: a replay of other contents (the trace was edited, re-recorded or re-stamped
since), or one that does not say what it replayed, is ignored with a line saying why (or
refused, where the reader's answer would be the replay itself).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPLAY_DIR = "replay"
VERDICT = "verdict.json"
#: the verdict key holding ``{data file: sha256}`` of the contents replayed
FILES_KEY = "trace_files"
#: the largest verdict.json read (a verdict holds a few fields per output)
MAX_VERDICT_BYTES = 4 << 20


def replayed_files(manifest: Mapping[str, Any]) -> dict[str, str]:
    """``{data file: sha256}`` of a trace, from its (verified) manifest: what a verdict of a
    replay of this trace records."""
    files = manifest.get("files") or {}
    return {str(k): str(v) for k, v in sorted(files.items())}


def read_verdict(path: str | Path) -> dict[str, Any] | str:
    """``replay/verdict.json`` of the trace at ``path`` parsed, or why it cannot be."""
    vpath = Path(path) / REPLAY_DIR / VERDICT
    try:
        if not vpath.is_file():
            return f"it has no {VERDICT}"
        if vpath.stat().st_size > MAX_VERDICT_BYTES:
            return f"its {VERDICT} is larger than {MAX_VERDICT_BYTES} bytes"
        verdict = json.loads(vpath.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        return f"its {VERDICT} is unreadable ({' '.join(str(exc).split())[:120]})"
    return verdict if isinstance(verdict, dict) else f"its {VERDICT} is not a verdict object"


def stale_reason(verdict: Mapping[str, Any], manifest: Mapping[str, Any]) -> str | None:
    """None when ``verdict`` is of a replay of the trace's current contents, else why not."""
    got = verdict.get(FILES_KEY)
    if not isinstance(got, dict):
        return "it does not record which trace contents it replayed (re-run kernbench replay)"
    want = replayed_files(manifest)
    changed = sorted(n for n in set(got) | set(want) if got.get(n) != want.get(n))
    if changed:
        return (f"it replayed other contents ({', '.join(changed)} changed since; re-run "
                "kernbench replay)")
    return None


def replay_status(path: str | Path, manifest: Mapping[str, Any]) -> str | None:
    """Why the trace's ``replay/`` may not be used (None: it is this trace's own replay),
    said of it (``"it replayed other contents (...)"``)."""
    verdict = read_verdict(path)
    if isinstance(verdict, str):
        return verdict
    return stale_reason(verdict, manifest)
