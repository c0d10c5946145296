"""The critical path summed for ``kernbench report``, ``--json``, ``plot`` and the HTML
report: by engine, by source line, by part (the engines' own work and each shared part's
waits), by shared resource, and the head-of-line waits (docs/analysis.md)."""

from __future__ import annotations

from typing import Any

import polars as pl

from kernbench.analyze.path_parts import PART_COLUMNS, PARTS

#: how many source lines (and resources, head-of-line pairs) a summary lists; the rest are
#: one ``(other lines)`` row
TOP_LINES = 15
#: what each by-engine and by-line row sums besides ``path_ps`` and ``ops``
_SUMS = (*PART_COLUMNS, "behind_ps")
OTHER = "(other lines)"


def _fold(frame: pl.DataFrame, key: str, top: int) -> pl.DataFrame:
    """``frame`` (sorted, largest first) with its rows past ``top`` summed into one."""
    if frame.height <= top:
        return frame
    rest = frame.slice(top)
    other: dict[str, list[Any]] = {
        c: [int(rest[c].sum())] if frame.schema[c].is_numeric() else [None]
        for c in frame.columns}
    other[key] = [OTHER]
    return pl.concat([frame.head(top), pl.DataFrame(other, schema=frame.schema)])


def _by(path: pl.DataFrame, key: str, *extra: str) -> pl.DataFrame:
    return (path.group_by(key).agg(pl.col("path_ps").sum(), pl.len().alias("ops"),
                                   *[pl.col(c).sum() for c in (*extra, *_SUMS)])
            .sort("path_ps", key, descending=[True, False]))


def _parts(path: pl.DataFrame) -> list[tuple[str, int]]:
    """(part, ps on the path): the engines' own work, then each shared part."""
    waits = [(p, int(path[f"{p}_ps"].sum() or 0)) for p in PARTS]
    total = int(path["path_ps"].sum() or 0)
    return [("engine", total - sum(ps for _, ps in waits)), *waits]


def _resources(path: pl.DataFrame, top: int) -> pl.DataFrame:
    per = (path.select("resources").explode("resources").drop_nulls().unnest("resources")
           .group_by("resource", "part").agg(path_ps=pl.col("ps").sum(), ops=pl.len())
           .sort("path_ps", "resource", descending=[True, False]))
    return _fold(per, "resource", top)


def _behind(path: pl.DataFrame, top: int) -> pl.DataFrame:
    """Head-of-line waits by (line, engine, the line waited behind)."""
    hol = (path.filter(pl.col("edge") == "behind")
           .group_by("src", "engine", "behind_src")
           .agg(programs=pl.col("behind_program").n_unique().cast(pl.Int64), ops=pl.len(),
                behind_ps=pl.col("behind_ps").sum(), wait_ps=pl.col("wait_ps").sum(),
                path_ps=pl.col("path_ps").sum())
           .sort("behind_ps", "wait_ps", "src", "behind_src",
                 descending=[True, True, False, False]))
    return _fold(hol, "src", top)


def summary(path: pl.DataFrame, latency: int, top: int = TOP_LINES) -> dict[str, Any]:
    """Time on the path by engine and by source line (each with the part of it spent waiting
    for each shared part, and the head-of-line waits behind other programs), by part, by
    shared resource, and the head-of-line pairs; each with its share of ``latency``, and the
    path's own share (1.0 when it tiles the whole latency)."""
    def share(ps: int) -> float:
        return ps / latency if latency else 0.0

    def rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
        return [{**r, "share": share(r["path_ps"])} for r in frame.to_dicts()]

    total = int(path["path_ps"].sum() or 0)
    return {
        "path_ps": total, "latency_ps": latency, "share": share(total), "ops": path.height,
        "by_engine": rows(_by(path, "engine")),
        "by_line": rows(_fold(_by(path, "src", "wait_ps").select(
            "src", "path_ps", "ops", "wait_ps", *_SUMS), "src", top)),
        "by_part": [{"part": p, "path_ps": ps, "share": share(ps)} for p, ps in _parts(path)],
        "by_resource": rows(_resources(path, top)),
        "behind": rows(_behind(path, top)),
    }
