"""The op table as Markdown, for the docs (``python -m kernbench.schemas.ops_markdown``)."""

from __future__ import annotations

from kernbench.schemas.ops import OPS


def markdown() -> str:
    """One row per op of ``OPS``: name, kind, engine, cost, family, dtype, arity, whether
    ``tl`` has it, and its meaning."""
    rows = ["| name | kind | engine | cost | family | dtype | arity | tl | meaning |",
            "|---|---|---|---|---|---|---|---|---|"]
    for s in OPS.values():
        rows.append(f"| `{s.op}` | {s.kind} | {s.engine} | {s.cost} | {s.family} | {s.dtype} "
                    f"| {s.arity if s.arity >= 0 else 'n'} | {'yes' if s.tl else ''} "
                    f"| {s.doc} |")
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover - prints the generated doc table
    print(markdown())
