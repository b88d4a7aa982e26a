"""The localization in the reports, on a synthetic LocalizeEvidence (the real one is made in
tests/checks/test_localize_real.py): the record reads it back from JSON, JUnit carries the first
op, the HTML's "where it departs" shows both lanes with the per-op plot (also in headless Chromium),
and the history keeps the first op so a new departure is a regression."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image

from harness.evidence import Localization, LocalizeEvidence, OpGap, Outcome, QuantFinding, TeacherForced
from harness.report import History, TestRecord, aggregate, junit_document, render_html
from harness.report.plots import layer_runs

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _ops(fault_at: int | None) -> tuple[OpGap, ...]:
    """40 ops of two layers at 60-90 dB, a cast shown not judged; the fault (if any) at 6 dB."""
    ops = []
    for i in range(40):
        db = 6.0 if i == fault_at else (12.0 if fault_at is not None and i > fault_at else 60.0 + (i * 7) % 30)
        ops.append(OpGap(i, f"aten_op_{i}", "aten.mul.Tensor" if i == fault_at else "aten.linear.default",
                         f"layers.{i // 20}", db, 0.75 if i == fault_at else 0.999, 0.31 if i == fault_at else 0.0,
                         judged=i != 3, unjudged="dtype cast" if i == 3 else ""))
    return tuple(ops)


def localization(fault_at: int | None = 27) -> Localization:
    ops = _ops(fault_at)
    if fault_at is None:
        return Localization(Outcome.NONE, 20.0, "16a8w", ops)
    return Localization(Outcome.DEPARTED, 20.0, "16a8w", ops, first=ops[fault_at],
                        following=ops[fault_at + 1:fault_at + 4])


def _et_record(loc: Localization, device: str = "emu") -> TestRecord:
    rec = TestRecord(name="test_localize[16a8w]", suite="executorch_qnn", device=device, model="tiny")
    rec.put(LocalizeEvidence(loc, cell="test_quant_format_runs[16a8w]"))
    return rec


def _mnn_records(device: str = "emu") -> list[TestRecord]:
    quant = TestRecord(name="test_quant_metadata", suite="qwen3", device=device, model="tiny")
    quant.put(QuantFinding("mlp_mul_inherited", "/layers.1/mlp/Mul_output_0", 1,
                           "block 1: MLP Mul output /layers.1/mlp/Mul_output_0 is bit-identical to its input", 28))
    cell = TestRecord(name="test_generation[qnn-p1]", suite="qwen3", device=device, model="tiny")
    cell.put(TeacherForced.of_json({"verdict": "disagree", "a": "cpu", "b": "qnn", "mean_kl": 0.9, "nll_gap": 0.5,
                                    "disagreements": 5, "counted_steps": 16, "first_disagreement": 4}))
    return [quant, cell]


def test_the_localization_reads_back_from_a_records_json() -> None:
    rec = _et_record(localization())
    again = TestRecord.from_dict(json.loads(rec.to_json()))
    ev = again.evidence.get(LocalizeEvidence)
    assert ev is not None and ev == rec.evidence.get(LocalizeEvidence)
    assert ev.result.first is not None and ev.result.first.node == "aten_op_27" and ev.cell == "test_quant_format_runs[16a8w]"
    assert "localize" not in again.extras  # typed, not free-form


def test_junit_names_the_first_op_its_layer_and_what_follows() -> None:
    root = ET.fromstring(junit_document([_et_record(localization()), _et_record(localization(None), "emu2")]))
    props = [{p.get("name"): p.get("value") for p in case.iter("property")} for case in root.iter("testcase")]
    assert props[0]["localize"] == "departed" and props[0]["localize_first_op"] == "aten_op_27"
    assert (props[0]["localize_layer"], props[0]["localize_sqnr_db"], props[0]["localize_cosine"]) == ("layers.1", "6.00", "0.7500")
    assert props[0]["localize_saturation"] == "0.3100"
    assert props[0]["localize_follows"] == "aten_op_28 12.0 dB, aten_op_29 12.0 dB, aten_op_30 12.0 dB"
    assert props[1]["localize"] == "none" and "localize_first_op" not in props[1]


def _plot_of(page: str) -> Image.Image:
    found = re.search(r'<img class="localize-plot" src="data:image/png;base64,([^"]+)"', page)
    assert found, "no per-op plot in the page"
    return Image.open(io.BytesIO(base64.b64decode(found.group(1))))


def _red_pixels(image: Image.Image) -> int:
    rgb = image.convert("RGB")  # getcolors gives (count, (r, g, b)) for an RGB image
    colours = [(n, c) for n, c in rgb.getcolors(maxcolors=1 << 24) or [] if isinstance(c, tuple)]
    return sum(n for n, (r, g, b, *_) in colours if r > 200 and g < 60 and b < 60)


def test_where_it_departs_shows_both_lanes_and_the_plot_marks_the_first_departure() -> None:
    page = render_html([_et_record(localization()), *_mnn_records()], title="t")
    section = page.split('<h2 id="where-it-departs">', 1)[1].split("<h2>", 1)[0]
    assert "<h3>emu: tiny</h3>" in section and section.count('<div class="where-it-departs">') == 1  # one view
    assert '<tr class="first-departure"><td>first departure</td><td>aten_op_27</td>' in section
    assert "layers.1" in section and "31.0%" in section and "for test_quant_format_runs[16a8w]" in section
    assert "tensor /layers.1/mlp/Mul_output_0, layer 1" in section and "first of 28" in section  # MNN lane
    assert "first teacher-forced step that disagrees: step 4 (qnn vs cpu, disagree)" in section
    marked = _plot_of(page)
    healthy = _plot_of(render_html([_et_record(localization(None))], title="t"))
    assert marked.size == healthy.size and marked.format == "PNG"
    assert _red_pixels(marked) > 50 and _red_pixels(healthy) == 0  # the first departure's red marker


def test_the_plot_shades_the_model_blocks_an_op_sits_in() -> None:
    ops = [OpGap(i, f"op{i}", "aten.add.Tensor", layer, 60.0, 1.0, 0.0) for i, layer in enumerate(
        ["", "layers.0", "layers.0.qkv", "", "layers.0.down", "layers.1.ln_attn", "layers.1", "layers.10.up", "head"])]
    assert layer_runs(ops) == [("layers.0", 1, 4), ("layers.1", 5, 6), ("layers.10", 7, 7), ("head", 8, 8)]


def test_the_history_keeps_the_first_op_and_flags_a_new_departure(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as h:
        for i in range(3):
            h.add_night(f"n{i}", [_et_record(localization(None))], started_at=float(i))
        h.add_night("n3", [_et_record(localization(27))], started_at=3.0)
        rows = {r.night_id: r for r in h.results()}
        assert (rows["n0"].text("localize_first_op"), rows["n0"].number("localize_sqnr_db")) == ("none", None)
        assert (rows["n3"].text("localize_first_op"), rows["n3"].number("localize_sqnr_db")) == ("aten_op_27", 6.0)
        found = [r for r in h.regressions("n3") if r.kind == "localize"]
        assert [r.describe() for r in found] == [
            "emu/tiny: the first op departing from the CPU reference is now aten_op_27 (was none) at 6.0 dB SQNR "
            "(not in the last 3 nights)"]
        assert not [r for r in h.regressions("n2") if r.kind == "localize"]
    assert aggregate([_et_record(Localization(Outcome.UNDECIDABLE, 20.0, "16a8w", ()))])[0]["localize_first_op"] is None


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_the_where_it_departs_section_renders_in_headless_chromium(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html([_et_record(localization()), *_mnn_records()], title="localize"), encoding="utf-8")
    shot = tmp_path / "shot.png"
    assert CHROMIUM is not None
    res = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
         f"--screenshot={shot}", "--window-size=1100,1400", page.as_uri()],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert shot.is_file(), res.stderr[-2000:]
    with Image.open(shot) as image:
        assert _red_pixels(image) > 50  # the plot was decoded and drawn, first departure marked
