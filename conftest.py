"""README.md and docs/*.md as tests (Sybil; docs/adr/0800-documentation-blocks-run-as-tests.md).

Every fenced block of the documents is an item named by its section and line, run by
``kernbench.docs.session`` in a scratch folder of its document: Python blocks execute, ``sh``
blocks run command by command with their printed figures checked, ``file`` blocks are
written for the commands after them, excerpts and synopses are checked against the code.
Blocks marked ``heavy`` run only with ``--slow`` (the slow job: ``pytest --slow -m slow -n 2
README.md docs``), at the sizes the page shows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sybil import Document, Example, Region, Sybil
from sybil.integration.pytest import SybilItem

from kernbench.docs.blocks import DOCUMENTS, Block, parse
from kernbench.docs.session import DocSession, kind

ROOT = Path(__file__).resolve().parent
#: whether heavy blocks run (``--slow``), set when pytest configures
HEAVY = {"on": False}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true",
                     help="also run the documented examples marked heavy, at the sizes the "
                          "docs show (the slow job)")


def pytest_configure(config: pytest.Config) -> None:
    HEAVY["on"] = bool(config.getoption("--slow"))
    config.addinivalue_line("markers", "slow: a heavy documented example (runs with --slow)")


def _regions(document: Document) -> Iterator[Region]:
    doc = Path(document.path).resolve().relative_to(ROOT).as_posix()
    for block in parse(document.text, doc):
        if kind(block) not in ("skip", "shown") or block.lang == "toml":
            yield Region(block.start, block.end, parsed=block, evaluator=_evaluate)


def _evaluate(example: Example) -> None:
    block: Block = example.parsed
    session = example.namespace.get("_kbdoc")
    if session is None:
        folder = example.namespace["tmp_path_factory"].mktemp(Path(block.path).stem)
        session = example.namespace["_kbdoc"] = DocSession(ROOT, block.path, folder,
                                                           heavy=HEAVY["on"])
    session.run(block)


class _DocSybil(Sybil):
    def identify(self, example: Example) -> str:
        block: Block = example.parsed
        slug = re.sub(r"[^a-z0-9]+", "-", block.section.lower()).strip("-") or "top"
        return f"{slug}:{block.line}:{kind(block) if kind(block) != 'shown' else block.lang}"


pytest_collect_file = _DocSybil(parsers=[_regions], patterns=list(DOCUMENTS),
                                fixtures=["tmp_path_factory"]).pytest()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Heavy blocks carry the ``slow`` mark; without ``--slow`` every ``slow`` item (a heavy
    block, or a test of a documented figure at its documented size) is deselected."""
    for item in items:
        if isinstance(item, SybilItem) and item.example.parsed.directive.heavy:
            item.add_marker(pytest.mark.slow)
    heavy = [i for i in items if i.get_closest_marker("slow")]
    if heavy and not HEAVY["on"]:
        config.hook.pytest_deselected(items=heavy)
        items[:] = [i for i in items if i not in heavy]
