"""Code and docs cite only documents the repository holds: every ``docs/...`` path named in
the source, the tests and the docs (the ADRs aside) exists, every relative Markdown link
resolves, and no comment cites the external specification ("SPEC §N") or a build part
("Part A")."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC_PATH = re.compile(r"\bdocs/[\w./-]+?\.(?:md|png|svg)\b")
LINK = re.compile(r"\]\(((?!https?:)[\w./-]+\.(?:md|png|svg|py|toml))(?:#[\w-]*)?\)")
EXTERNAL = re.compile(r"SPEC §|\bPart [A-Z]\b")


def _files() -> list[Path]:
    py = [*(ROOT / "src").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    return sorted(p for p in py if "__pycache__" not in p.parts) + sorted(
        (ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]


def test_every_cited_docs_path_exists() -> None:
    """(The ADRs are a record of their time: the files they name may since have gone.)"""
    current = [p for p in _files() if "adr" not in p.parts]
    missing = [f"{p.relative_to(ROOT)}: {m}" for p in current
               for m in DOC_PATH.findall(p.read_text()) if not (ROOT / m).exists()]
    assert missing == []


def test_every_relative_markdown_link_resolves() -> None:
    md = [p for p in _files() if p.suffix == ".md"]
    broken = [f"{p.relative_to(ROOT)}: {m}" for p in md for m in LINK.findall(p.read_text())
              if not (p.parent / m).exists()]
    assert broken == []


def test_no_code_cites_the_external_spec_or_a_build_part() -> None:
    here = Path(__file__).resolve()
    cited = [f"{p.relative_to(ROOT)}:{i}" for p in _files() if p.suffix == ".py" and p != here
             for i, line in enumerate(p.read_text().splitlines(), 1) if EXTERNAL.search(line)]
    assert cited == []
