"""The measured HTP arch table (harness/qnn/arch_limits.json, written on this host by
`python -m harness.qnn.probe`), the skip reasons read from it, and the tool's refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.qnn import DEFAULT_PATH, QnnFailure, classify_qnn_log, load_arch_limits
from harness.qnn.probe import DEFAULT_FORMATS, PROBE_NAMES, SOC_OF_ARCH, Batch
from harness.qnn.probe.__main__ import main as probe_main
from harness.qnn.probe.run import _cell, _sections
from harness.runners import plan_matrix, skip_reason
from tests.shared import SHARED as SHARED_DIR

REPO = Path(__file__).resolve().parents[2]
SHARED = SHARED_DIR / "models" / "et-qnn-host"


@pytest.fixture(scope="module")
def table():
    return load_arch_limits()


def test_the_packaged_table_is_complete_and_dated(table) -> None:
    data = json.loads(DEFAULT_PATH.read_text())
    assert (table.qairt, table.executorch) == ("2.49.40", "1.5.1")
    # measured before the probe moved to harness.qnn.probe (the old path still runs it): either name
    assert data["qairt_build"].startswith("v2.49.40.") and data["tool"] in ("python -m harness.qnn_probe",
                                                                          "python -m harness.qnn.probe")
    measured = {(c.op, c.fmt, c.arch) for c in table.cells}
    assert measured == {(o, f, a) for o in PROBE_NAMES for f in DEFAULT_FORMATS for a in SOC_OF_ARCH}
    assert all(c.soc == SOC_OF_ARCH[c.arch] for c in table.cells)
    assert all(c.failure for c in table.cells if not c.built)


def test_v68_rows_are_qnns_answers(table) -> None:
    ln = table.cell("layer_norm", "16a4w", "v68")
    assert not ln.built and ln.failure == QnnFailure.OP_VALIDATION and ln.needed_arch == "v73"
    assert "expected >= 73" in ln.message
    assert not table.cell("matmul", "16a8w", "v68").built
    assert table.cell("layer_norm", "8a8w", "v68").built and table.cell("matmul", "8a8w", "v68").built
    assert table.cell("rms_norm", "16a8w", "v68").built  # RMSNorm is not LayerNorm on v68
    # ExecuTorch's v68 workaround (a 4-bit layer_norm weight) does not build either
    assert not table.cell("layer_norm_w4", "16a4w", "v68").built
    assert all(c.built for c in table.cells if c.arch in ("v73", "v75", "v79") and c.op != "layer_norm_w4")


def test_skip_reasons_read_the_table(table) -> None:
    why = skip_reason("16a4w", "v68", table)
    assert why is not None
    assert "layer_norm" in why and "matmul" in why and "v73" in why and "QAIRT 2.49.40" in why
    assert "builds there: 8a8w" in why
    assert skip_reason("8a8w", "v68", table) is None
    assert skip_reason("16a4w", "v75", table) is None
    assert skip_reason("8a4w", "v68", table) is None  # not measured: not skipped
    cells = {(c.quant, c.htp_arch): c for c in plan_matrix(DEFAULT_FORMATS, [("sa8295", "v68"), "v79"], table)}
    assert not cells[("16a8w", "v68")].runnable and cells[("16a8w", "v79")].runnable
    assert cells[("8a8w", "v68")].id == "sa8295-8a8w"


def test_qnn_log_says_what_builds_instead() -> None:
    seed = SHARED / "seed-v68" / "ln-16a4w-ln16a16w-sa8295.log"
    text = seed.read_text() if seed.is_file() else (REPO / "fixtures/qnn_logs/lower-matmul-16a8w-sa8295.log").read_text()
    v = classify_qnn_log(text)
    assert v.builds_instead == "8a8w" and "8a8w" in v.message and "QAIRT 2.49.40" in v.message


def test_a_cell_is_judged_by_qnn_log() -> None:
    log = (REPO / "fixtures/qnn_logs/lower-matmul-16a8w-sa8295.log").read_text()
    section = log.split("@@qnn_probe begin matmul", 1)[1].split("@@qnn_probe result", 1)[0]
    result = json.loads(log.split("@@qnn_probe result ", 1)[1].splitlines()[0])
    cell = _cell(Batch("SA8295", ("16a8w",), ("matmul",)), "16a8w", "matmul", section, result, 1)
    assert (cell.built, cell.failure, cell.needed_arch, cell.arch) == (False, "op-validation", "v73", "v68")


def test_sections_split_at_the_childs_markers() -> None:
    out = ("noise\n@@qnn_probe begin 16a8w linear\nqnn line\n@@qnn_probe result {\"op\": \"linear\", \"lowered\": true, "
           "\"delegates\": 1, \"cpu_ops\": []}\n@@qnn_probe begin 16a8w matmul\nlast words\n")
    s = _sections(out)
    assert s[("16a8w", "linear")] == ("qnn line", {"op": "linear", "lowered": True, "delegates": 1, "cpu_ops": []})
    assert s[("16a8w", "matmul")] == ("last words", None)  # the child died in it


def test_missing_or_fake_table_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"nope\.json: the measured HTP arch table is missing.*harness\.qnn\.probe"):
        load_arch_limits(tmp_path / "nope.json")
    fake = tmp_path / "fake.json"
    fake.write_text(json.dumps({"version": 1, "qairt": "2.49.40", "executorch": "1.5.1", "cells": []}))
    with pytest.raises(HarnessError, match="no measured cells"):
        load_arch_limits(fake)
    fake.write_text(json.dumps({"version": 1, "qairt": "2.49.40", "executorch": "1.5.1",
                                "cells": [{"op": "linear", "format": "8a8w", "arch": "v99", "soc": "X", "built": True}]}))
    with pytest.raises(HarnessError, match="cell #1: arch 'v99'"):
        skip_reason("8a8w", "v68", load_arch_limits(fake))


def test_regenerate_refuses_a_fake_sdk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.json"
    assert probe_main(["--qnn-sdk", str(tmp_path), "--out", str(out)]) == 4
    assert "libQnnHtp.so" in capsys.readouterr().err
    lib = tmp_path / "sdk" / "lib" / "x86_64-linux-clang"
    lib.mkdir(parents=True)
    (lib / "libQnnHtp.so").write_bytes(b"\x7fELF not a QAIRT library")
    assert probe_main(["--qnn-sdk", str(tmp_path / "sdk"), "--out", str(out)]) == 4
    assert "libQnnSystem.so" in capsys.readouterr().err  # half an SDK: named, nothing run
    assert probe_main(["--arch", "v99", "--out", str(out)]) == 4
    assert not out.exists()


def test_a_child_killed_in_a_probe_gives_that_probe_the_crash_and_the_rest_a_new_child() -> None:
    from harness.qnn import HostQnn
    from harness.qnn.probe import ChildRun, measure_batch

    segv = (REPO / "fixtures/qnn_logs/lower-segv-decoder-16a8w-sm8650.log").read_text()
    ok = '@@qnn_probe result {"lowered": true, "delegates": 1, "cpu_ops": []}\n'
    calls: list[Batch] = []

    def runner(batch: Batch, qnn: HostQnn, timeout: float) -> ChildRun:
        calls.append(batch)
        if len(calls) == 1:  # linear builds, then the child dies inside matmul
            return ChildRun(f"@@qnn_probe begin 16a8w linear\n{ok}@@qnn_probe begin 16a8w matmul\n{segv}", -11)
        return ChildRun("".join(f"@@qnn_probe begin {f} {o}\n{ok}" for f, o in batch.pairs), 0)

    unused = HostQnn(Path("/nowhere"), Path("/nowhere"), "v2.49.40.000000000000", "test: the runner is given")
    cells = measure_batch(Batch("SM8650", ("16a8w", "8a8w"), ("linear", "matmul", "softmax")), unused, 60,
                          runner=runner)
    got = {(c.fmt, c.op): (c.built, c.failure) for c in cells}
    assert got[("16a8w", "matmul")] == (False, "build-segfault")
    assert all(v == (True, None) for k, v in got.items() if k != ("16a8w", "matmul")) and len(got) == 6
    assert [b.pairs for b in calls[1:]] == [(("16a8w", "softmax"),), (("8a8w", "linear"), ("8a8w", "matmul"),
                                                                     ("8a8w", "softmax"))]
