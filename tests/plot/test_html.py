"""kernbench report --html: one self-contained page whose pictures a real browser renders."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from click.testing import CliRunner

from kernbench.cli import main

from .conftest import GOLDEN

#: appended to a copy of the report (the report itself has no scripts): after every image
#: has loaded, writes how many decoded to a non-zero size into the DOM chromium dumps
PROBE = """<script>
window.addEventListener("load", () => {
  const imgs = Array.from(document.images);
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 0 && i.naturalHeight > 0);
  const sizes = imgs.map(i => i.naturalWidth + "x" + i.naturalHeight).join(",");
  const out = document.createElement("pre");
  out.id = "kb-probe";
  out.textContent = "images=" + imgs.length + " rendered=" + ok.length + " sizes=" + sizes;
  document.body.appendChild(out);
});
</script>"""


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "headless Chromium is required (Debian: apt-get install -y chromium; .ci/run)"
    return exe


def rendered(page: Path) -> tuple[int, int, list[str]]:
    """Open ``page`` in headless Chromium; (images, rendered images, their sizes)."""
    probe = page.with_name(page.stem + "-probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    proc = subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={page.parent / 'chromium-profile'}",
         "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120)
    m = re.search(r"images=(\d+) rendered=(\d+) sizes=([\dx,]*)", proc.stdout)
    assert m, f"no probe result in the dumped DOM; chromium said: {proc.stderr[-500:]}"
    return int(m.group(1)), int(m.group(2)), m.group(3).split(",")


def _self_contained(text: str) -> None:
    assert "<script" not in text
    assert not re.search(r"""(src|href)=["'](?!data:)""", text)  # nothing fetched


def test_html_report_of_a_trace_renders_its_pictures_in_a_browser(tmp_path):
    out = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", str(GOLDEN / "ring-prefill.ktrace"),
                                       "--html", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    _self_contained(text)
    assert text.count("data:image/png;base64,") == 4
    assert "latency (ps)" in text and "bottleneck engine" in text
    images, ok, sizes = rendered(out)
    assert images == 4 and ok == 4, sizes
    assert all(int(s.split("x")[0]) >= 400 for s in sizes)


def test_html_report_of_a_sweep_renders_its_chart_in_a_browser(tmp_path, sweep_dir):
    out = tmp_path / "sweep.html"
    result = CliRunner().invoke(main, ["report", str(sweep_dir), "--html", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    _self_contained(text)
    assert "p1024x256" in text and "pbad" not in text  # ok points only
    images, ok, _ = rendered(out)
    assert images == ok == 1


def test_a_broken_image_is_reported_by_the_probe(tmp_path):
    """The probe can fail: a page with an undecodable image counts it as not rendered."""
    page = tmp_path / "bad.html"
    page.write_text('<html><body><img src="data:image/png;base64,AAAA"></body></html>')
    images, ok, _ = rendered(page)
    assert (images, ok) == (1, 0)


def test_html_report_to_an_unwritable_path_is_bad_input(tmp_path):
    result = CliRunner().invoke(main, ["report", str(GOLDEN / "gemm.ktrace"), "--html",
                                       str(tmp_path / "missing" / "dir" / "r.html")])
    assert result.exit_code == 2 and "Traceback" not in result.output
