"""The page as a reader sees it, in a real browser (headless Chromium, issue 43): a failed cell
shows its reason first (class and message, the figures against their line, the first departing
op), the runner's output stays collapsed, a format nothing ran at gets no column, and the export
cell says what was built. The page's visible text is read with the browser's own innerText (which
leaves out what a reader cannot see: a closed <details>), written into the dumped DOM."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.evidence import (
    Agreement,
    CacheUse,
    ExportBuild,
    FloatReferenceAgreement,
    Localization,
    LocalizeEvidence,
    OpGap,
    Outcome,
)
from harness.outcomes import FailureClass, Status
from harness.pairs import BackendPair
from harness.report import TestRecord, render_html
from harness.verdict import Verdict

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run"]
RUNNER_NOISE = "# LIBNATIVE: loading libqnn_executorch_backend.so"
# Written into the DOM by the page itself once loaded: the text a reader sees.
SEEN = "<script>document.documentElement.setAttribute('data-seen', document.body.innerText)</script></body>"


def _night() -> list[TestRecord]:
    def rec(name: str, fmt: str, device: str = "emu-sm8650", model: str = "dec3-fault2") -> TestRecord:
        return TestRecord(name=f"{device}::{name}[{fmt}]", suite="executorch_qnn", device=device, model=model,
                          backend_pair=BackendPair.parse(f"qnn:{fmt}"), duration_s=2.0)

    drift = rec("test_quant_format_runs", "16a8w")
    drift.text = RUNNER_NOISE + "\n" * 3 + "PyTorchObserver {...}"
    drift.put(FloatReferenceAgreement("reference/index.json", Agreement.DRIFT, 0.033, 0.05, 0.1, 0.2, 0.01, 0.02,
                                      ("median mean KL 0.033 >= 0.018",)))
    drift.set_verdict(Verdict.failed(FailureClass.DRIFT, "16a8w against its float model: drift"))
    gap = OpGap(41, "aten_mul_tensor_5", "aten.mul.Tensor", "layers.2", 4.2, 0.91, 0.2)
    loc = rec("test_localize", "16a8w")
    loc.put(LocalizeEvidence(Localization(Outcome.DEPARTED, 10.0, "16a8w", (gap,), gap), cell="test_quant_format_runs[16a8w]"))
    loc.set_verdict(Verdict.failed(FailureClass.DISAGREE, "16a8w against the CPU reference per op: see below"))
    skipped = [rec("test_quant_format_runs", f) for f in ("8a8w", "16a16w")]
    for r in skipped:
        r.set_verdict(Verdict.skipped(f"no {r.backend_pair.variant if r.backend_pair else ''} program in the export"))
    export = TestRecord(name="test_export[dec3-fault2-sm8650-16a8w]", suite="exports", device="lab-host",
                        model="dec3-fault2", backend_pair=BackendPair.parse("qnn:16a8w"), text="INFO: QNN log tail")
    export.put(ExportBuild("k", CacheUse.HIT, "SM8650", "16a8w", 57, "v75", (), "/cache/out", "/log", 103.0))
    export.set_verdict(Verdict(Status.PASSED, message="SM8650 16a8w: from the export cache (built in 103 s then)"))
    return [export, drift, loc, *skipped]


def _seen(page: str, tmp: Path) -> tuple[str, Path]:
    """The page's visible text in Chromium, and a screenshot of it."""
    path = tmp / "report.html"
    path.write_text(page.replace("</body>", SEEN, 1), encoding="utf-8")
    profile = [f"--user-data-dir={tmp / 'profile'}"]
    dom = subprocess.run([str(CHROMIUM), *FLAGS, *profile, "--dump-dom", path.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    shot = tmp / "report.png"
    subprocess.run([str(CHROMIUM), *FLAGS, *profile, "--window-size=1400,1800", f"--screenshot={shot}", path.as_uri()],
                   capture_output=True, timeout=120, check=True)
    found = re.search(r'data-seen="([^"]*)"', dom)
    assert found is not None, dom[:500]
    return html.unescape(found.group(1)), shot


@pytest.mark.skipif(not CHROMIUM.is_file() or shutil.which("chromium") is None,
                    reason="no /usr/bin/chromium (the Makefile's apt packages install it)")
def test_a_reader_sees_each_failed_cells_reason_first(tmp_path) -> None:
    seen, shot = _seen(render_html(_night(), title="a failing night"), tmp_path)
    cell = seen[seen.index("FAIL 2/2"):]
    cell = cell[:cell.index("\n\n")] if "\n\n" in cell else cell[:1500]
    assert "drift: 16a8w against its float model: drift" in cell, cell
    assert "median mean KL 0.033 >= 0.018" in cell and "aten_mul_tensor_5" in cell, cell
    assert RUNNER_NOISE not in seen  # collapsed under "output"
    assert "output" in cell
    assert "from the export cache (built in 103 s then)" in seen and "INFO: QNN log tail" not in seen
    assert "qnn:8a8w" in seen and "not shown: qnn:16a16w, qnn:8a8w" in seen  # no column: named once, below
    assert shot.is_file() and shot.stat().st_size > 10_000
