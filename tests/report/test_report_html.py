import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image as PILImage
from reportkit import HOSTILE, night_records

from harness.evidence import TeacherForced
from harness.outcomes import FailureClass
from harness.report import History, group_failures, render_html, write_html
from harness.verdict import Verdict


def test_hostile_text_is_escaped_everywhere():
    page = render_html(night_records(), title="night <b>1</b>")
    assert "<script>" not in page and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page
    assert "<b>1</b>" not in page and "night &lt;b&gt;1&lt;/b&gt;" in page
    assert "\x00" not in page and "\x1b" not in page and "#x1B[31mred" in page
    assert "Segmentation fault &lt;core dumped&gt; &amp; more" in page
    assert HOSTILE not in page


def test_hostile_text_is_escaped_in_departures_failures_and_plots():
    recs = night_records()
    tf = recs[0]
    tf.put(TeacherForced.of_json({
        "verdict": "disagree", "disagreements": 1, "counted_steps": 9, "first_disagreement": 3,
        "context": {"before": HOSTILE, "token": HOSTILE, "after": HOSTILE}, "exclusion_note": HOSTILE,
        "rows_near": [{"step": 3, "tok_a": 1, "tok_b": 2, "agree": False, "max_abs_diff": 1.5,
                       "text": HOSTILE}]}))  # a row's figures are typed numbers: its text is what can be hostile
    recs[3].set_verdict(Verdict.failed(FailureClass.CRASH, ""))
    recs[3].signature, recs[3].log_excerpt = HOSTILE, HOSTILE
    page = render_html(recs, title="t", plots={HOSTILE: HOSTILE})
    assert 'id="departures"' in page and page.count("<mark>") == 1 and "<pre>" in page
    assert "<script>" not in page and "\x00" not in page and "\x1b" not in page and HOSTILE not in page
    assert page.count("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;") >= 12


def test_matrix_failures_and_devices():
    page = render_html(night_records(), title="t")
    assert 'id="matrix-oneplus13"' in page and 'id="matrix-sa8295"' in page
    assert "FAIL 1/2 (crash)" in page and "PASS 2/2" in page and "decode 40.0 tok/s" in page
    assert re.search(r'class="status-quarantined">quarantined</td>', page)
    groups = group_failures(night_records())
    assert list(groups) == ["class:garbled", "lab:health", "sigsegv-in-llm-demo"]  # ties in name order
    assert [r.name for r in groups["sigsegv-in-llm-demo"]] == ["smollm2::matrix[cpu]::p1"]
    assert page.count("<details>") == 1  # only the crash has a log excerpt


def _png_is_blank(path: Path) -> bool:
    """Whether every pixel of the PNG is the same colour."""
    with PILImage.open(path) as image:
        assert image.format == "PNG"
        return image.convert("RGB").getcolors(maxcolors=1) is not None  # None: more colours than that


def test_trend_plots_are_written(tmp_path):
    with History(tmp_path / "h.sqlite") as h:
        for i in range(3):
            h.add_night(f"n{i}", night_records(decode_scale=1 + i / 10), started_at=float(i))
        path = write_html(night_records(), tmp_path / "out", title="t", history=h)
    page = path.read_text()
    png = tmp_path / "out" / "plots" / "trend-oneplus13.png"
    assert png.is_file() and 'src="plots/trend-oneplus13.png"' in page
    assert not _png_is_blank(png)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None, "chromium is not installed (make install puts it there)"
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp / 'profile'}", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp)})


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_report_renders_in_headless_chromium(tmp_path):
    with History(tmp_path / "h.sqlite") as h:
        for i in range(3):
            h.add_night(f"n{i}", night_records(decode_scale=1 + i / 10), started_at=float(i))
        page = write_html(night_records(), tmp_path / "out", title="nightly", history=h)
    dom = _chromium("--dump-dom", page.as_uri(), tmp=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'id="matrix-oneplus13"' in dom.stdout and "FAIL 1/2 (crash)" in dom.stdout
    # The hostile text stayed text: no script element made it into the DOM.
    assert "<script>" not in dom.stdout and "&lt;script&gt;" in dom.stdout
    shot = tmp_path / "shot.png"
    res = _chromium(f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri(), tmp=tmp_path)
    assert shot.is_file(), res.stderr[-2000:]
    assert not _png_is_blank(shot)
