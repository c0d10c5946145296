"""The doc-test machinery (kernbench.docs, the root conftest.py): every block of README.md and
docs/*.md is run or says why not, a printed figure that differs fails, a block runs after the
blocks before it whatever process it lands in, and every picture of docs/ is drawn by a block
of the docs and names the preset that drew it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernbench.docs import blocks, pictures, shell
from kernbench.docs.__main__ import main as docs_main
from kernbench.docs.session import DocSession, kind
from kernbench.errors import BadInputError, DocBlockError

ROOT = Path(__file__).resolve().parents[2]
IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<target>[^)]+\.png)\)")


def test_every_block_of_the_docs_runs_or_says_why_not():
    """A block is run (python, sh), written for the commands after it (file), checked
    against the code (excerpt, synopsis, toml), or a ``text`` block showing no command;
    a block that is not run names its reason."""
    found = list(blocks.all_blocks(ROOT))
    assert len(found) > 25
    for b in found:
        assert b.lang in (*blocks.RUN, *blocks.SHOW), f"{b.where}: language {b.lang!r}"
        if b.directive.skip is not None:
            assert len(b.directive.skip.split()) >= 3, f"{b.where}: skip without a reason"
    assert blocks.text_blocks_with_commands(ROOT) == []
    runs = [b for b in found if b.runs]
    assert len(runs) >= 15 and sum(not b.directive.heavy for b in runs) >= 10


def test_the_readme_set_up_lines_and_the_slow_job_are_the_only_blocks_not_run():
    skipped = [b.where for b in blocks.all_blocks(ROOT) if b.directive.skip is not None]
    assert [w.split(":")[0] for w in skipped] == ["README.md", "README.md", "docs/testing.md"]
    readme = (ROOT / "README.md").read_text()
    assert "pip install -e . && kernbench panel --quick\n" in readme
    assert "pip install -e '.[test]' && lint-imports && mypy && pytest -n 2\n" in readme


def test_a_printed_figure_the_page_does_not_show_fails(tmp_path):
    env = shell.reader_env("")
    shell.run_block("echo 'latency 5.566 us'\n# latency 5.566 us\n", "ok", tmp_path, env)
    with pytest.raises(DocBlockError, match=r"did not print.*\n  latency 6.860 us"):
        shell.run_block("echo 'latency 5.566 us'\n# latency 6.860 us\n", "doc:1", tmp_path, env)


def test_expected_lines_match_in_order_with_spaces_collapsed_and_ellipses():
    out = "a  b\nlatency_ps  11010000   5566000\nefficiency 0.7244\n"
    assert shell.missing_lines(("latency_ps 11010000 5566000", "efficiency ..."), out) == []
    assert shell.missing_lines(("efficiency ...", "latency_ps ..."), out) == ["latency_ps ..."]
    assert shell.missing_lines(("efficiency 0.72",), out) == ["efficiency 0.72"]  # whole line


def test_commands_take_the_comment_lines_under_them_as_their_output():
    cmds = shell.commands("# prose\nP=1\nkernbench a \\\n  -o x   # prose too\n# out 1\n# out 2\n"
                          "\n# prose again\nkernbench b\n")
    assert [(c.text.split()[0], c.expected) for c in cmds] == [
        ("P=1", ()), ("kernbench", ("out 1", "out 2")), ("kernbench", ())]
    assert "-o x" in cmds[1].text


def test_a_failing_command_fails_its_block_and_variables_carry_to_the_next(tmp_path):
    env = shell.reader_env("")
    env = shell.run_block('P="-p n=1"\n', "doc:1", tmp_path, env)
    shell.run_block('test "$P" = "-p n=1"\n', "doc:2", tmp_path, env)
    with pytest.raises(DocBlockError, match=r"doc:3: `false` exited 1"):
        shell.run_block("true\nfalse\necho never\n", "doc:3", tmp_path, env)


def test_the_reader_environment_has_no_kernbench_variable(monkeypatch):
    monkeypatch.setenv("KERNBENCH_HW", "ahbm-v1")  # as tests/conftest.py sets it
    env = shell.reader_env("/src")
    assert "KERNBENCH_HW" not in env and env["KBDOC_SRC"] == "/src"


def _doc(tmp_path: Path, text: str) -> DocSession:
    (tmp_path / "repo" / "pages").mkdir(parents=True)
    (tmp_path / "repo" / "pages" / "d.md").write_text(text)
    return DocSession(tmp_path / "repo", "pages/d.md", tmp_path / "work")


def test_a_block_run_alone_runs_the_blocks_before_it_first(tmp_path):
    """xdist may send a page's blocks to different workers: the last block still finds the
    file and the variable the earlier ones made."""
    s = _doc(tmp_path, "<!-- doctest: file m.py -->\n```python\nX = 41\n```\n\n```sh\n"
                       "export Y=1\n```\n\n<!-- doctest: heavy -->\n```sh\nexit 3\n```\n\n"
                       "```python\nimport m, os\nassert m.X + int(os.environ['Y']) == 42\n```\n")
    last = s.blocks[-1]
    s.run(last)  # the heavy block is not a prerequisite outside the slow job
    assert s.done == {b.line for b in s.blocks if not b.directive.heavy}
    assert kind(s.blocks[0]) == "file" and (s.folder / "m.py").read_text() == "X = 41\n"


def test_excerpt_and_synopsis_blocks_are_checked_against_the_code(tmp_path):
    s = _doc(tmp_path, "<!-- doctest: excerpt m.py -->\n```python\nx = 1\ny = 2\n```\n\n"
                       "<!-- doctest: synopsis -->\n```text\nkernbench record CASE --gpu X\n```\n")
    (s.root / "m.py").write_text("x = 1  # the excerpt may drop comments and lines\nz = 0\ny = 2\n")
    s.run(s.blocks[0])
    (s.root / "m.py").write_text("y = 2\nx = 1\n")
    with pytest.raises(DocBlockError, match="not in m.py"):
        s.run(s.blocks[0])
    with pytest.raises(DocBlockError, match="has no option --gpu"):
        s.run(s.blocks[1])


def test_an_unknown_doctest_word_is_one_line_of_bad_input():
    with pytest.raises(BadInputError, match="unknown doctest word 'haevy'"):
        blocks.parse("<!-- doctest: haevy -->\n```sh\ntrue\n```\n", "x.md")


def test_every_picture_of_docs_is_drawn_by_a_block_and_names_its_preset():
    drawn = {name for b in pictures.picture_blocks(ROOT) for name in pictures.drawn(b)}
    stored = {p.name for p in (ROOT / "docs" / "pictures").glob("*.png")}
    assert stored == drawn
    shown = [m for doc in blocks.documents(ROOT) for m in IMAGE.finditer(doc.read_text())]
    assert {Path(m.group("target")).name for m in shown} == stored
    for m in shown:
        assert re.search(r"ahbm-v\d", m.group("alt")), m.group(0)


def test_python_m_kernbench_docs_says_what_it_would_draw_and_refuses_an_unknown_name(capsys):
    assert docs_main(["--list", "--root", str(ROOT)]) == 0
    listed = capsys.readouterr().out
    assert "docs/hardware-model.md:" in listed and "prefill-serial-v1.png" in listed
    assert docs_main(["nope.png", "--root", str(ROOT)]) == 2
    assert "no block draws nope.png" in capsys.readouterr().err


def test_python_m_kernbench_docs_redraws_a_picture_from_its_block(tmp_path):
    import shutil

    from PIL import Image

    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", root)
    for doc in (ROOT / "docs").glob("*.md"):
        shutil.copy(doc, root / "docs")
    written = pictures.regenerate(root, ("prefill-serial-v1.png",), progress=lambda _: None)
    assert written == [root / "docs" / "pictures" / "prefill-serial-v1.png"]
    with Image.open(written[0]) as img:
        assert img.mode == "P" and img.size == (1320, 1100)  # palette-quantised, full size


def test_every_file_a_documented_spec_names_is_shown_on_its_page():
    """Issue 42: sweeps.md's spec named a ``rules.toml`` the page never showed (``rules file
    'rules.toml': No such file``). A spec written by a ``file`` block names only files the
    same page writes too."""
    import tomllib

    found = list(blocks.all_blocks(ROOT))
    specs = [b for b in found if b.directive.file and b.lang == "toml"]
    assert specs
    for spec in specs:
        named = (tomllib.loads(spec.text).get("stages") or {}).get("rules")
        if named:
            written = {b.directive.file for b in found if b.path == spec.path}
            assert named in written, f"{spec.where} names {named}, which its page never shows"
