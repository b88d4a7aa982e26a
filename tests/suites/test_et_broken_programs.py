"""A broken program in a --model-dir of ExecuTorch exports is a failure naming the file and the
loader's words, never "no program of that format" (issue 36, fault 1): a real QNN program cut
to two thirds, and random bytes, as a quant format's export and as a CPU export. The checks
decide before any runner starts (no device work)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from harness.inventory import load_inventory
from harness.report import TestRecord
from harness.suite import ET_CPU_EXPORTS, ET_FORMAT_RUNS, EXECUTORCH_QNN, Instance, run_check
from harness.suite.executorch import build_et_input
from harness.transport import LocalTransport
from tests.qnn.material import ET_QNN

REAL = ET_QNN / "llm" / "kv-16a8w-sm8650.pte"


def _damaged(how: str) -> bytes:
    if how == "random":
        return os.urandom(4096)
    if not REAL.is_file():
        pytest.skip(f"{REAL} is absent: the truncated case cuts ../shared's real QNN program")
    data = REAL.read_bytes()
    return data[: len(data) * 2 // 3]


def _decide(tmp_path: Path, fmt: str, how: str, check=ET_FORMAT_RUNS, instance=None) -> TestRecord:
    export = tmp_path / "exports" / fmt
    export.mkdir(parents=True)
    (export / "model.pte").write_bytes(_damaged(how))
    (export / "tokenizer.json").write_text('{"model": {"type": "BPE", "vocab": {}}}')
    inv = tmp_path / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{"name": "emu", "transport": "local", "soc": "SM8650",
                                                "htp": "emulator", "work_dir": str(tmp_path / "w")}]}))
    transport = LocalTransport(load_inventory(inv).get("emu"))
    inp = build_et_input(transport, tmp_path / "exports", work=tmp_path / "work", device_runtime=None)
    rec = TestRecord(name=f"test_{check.name}", suite="executorch_qnn", device="emu")
    run_check(EXECUTORCH_QNN, check, instance or Instance(quant=fmt), inp, rec)
    return rec


@pytest.mark.parametrize("how, words", [("truncated", "truncated or corrupt: its header says"),
                                        ("random", "not an ExecuTorch program (no 'ET12' identifier")])
def test_a_broken_quant_format_program_fails_naming_it(tmp_path: Path, how: str, words: str) -> None:
    rec = _decide(tmp_path, "16a8w", how)
    assert (rec.status, rec.failure_class) == ("failed", "export-invalid"), rec.message
    assert str(tmp_path / "exports" / "16a8w" / "model.pte") in rec.message and words in rec.message


def test_a_broken_cpu_program_fails_not_skips(tmp_path: Path) -> None:
    rec = _decide(tmp_path, "xnnpack", "random", ET_CPU_EXPORTS, Instance())
    assert (rec.status, rec.failure_class) == ("failed", "export-invalid"), rec.message
    assert "xnnpack: " in rec.message and "ET12" in rec.message
