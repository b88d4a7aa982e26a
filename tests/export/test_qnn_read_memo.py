"""The target guard's memo of QNN's reads (harness/qnn/compiled_io/memo.py), on real context
binaries and a real PTE: a file version QNN already judged is not read (nor its program parsed)
again, with the same answer, refusals included; a rewritten file, another library or a corrupt
memo means reading again."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import harness.qnn.pte
from harness.qnn import BinaryInfo, QnnSystemLib
from harness.qnn.compiled_io import ReadMemo, read_binaries_target
from tests.qnn.material import et_qnn_or_skip, wheel_or_skip

pytestmark = pytest.mark.real_qnn
SM8750 = "lnprobe-qio-16a4w-ln16a16w-sm8750.bin"
SM8650 = "lnprobe-qio-16a4w-ln16a16w-sm8650.bin"


@pytest.fixture(autouse=True)
def _real_material() -> None:
    wheel_or_skip()
    et_qnn_or_skip("ctx")


def _export(tmp_path: Path, *bins: str) -> Path:
    root = tmp_path / "export"
    (root / "qnn").mkdir(parents=True)
    for n, name in enumerate(bins):
        shutil.copy(et_qnn_or_skip("ctx", name), root / "qnn" / f"graphllm{n}.bin")
    return root


def _no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("QNN was asked to read a file version it already judged")

    monkeypatch.setattr(QnnSystemLib, "read_file", refuse)
    monkeypatch.setattr(harness.qnn.pte, "qnn_delegates", refuse)


def test_an_unchanged_binary_is_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, memo = _export(tmp_path, SM8750, SM8750), tmp_path / "memo.json"
    first = read_binaries_target(root, memo_path=memo)
    assert first is not None and first.soc_ids == (69,) and first.htp_archs == ("v79",) and not first.refused
    assert len(json.loads(memo.read_text())["files"]) == 2
    _no_reading(monkeypatch)
    again = read_binaries_target(root, memo_path=memo)
    assert again is not None and again.soc_ids == first.soc_ids and again.builds == first.builds
    assert again.read == first.read == ("qnn/graphllm0.bin", "qnn/graphllm1.bin")


def test_a_rewritten_binary_is_read_again(tmp_path: Path) -> None:
    root, memo = _export(tmp_path, SM8750, SM8750), tmp_path / "memo.json"
    read_binaries_target(root, memo_path=memo)
    shutil.copy(et_qnn_or_skip("ctx", SM8650), root / "qnn" / "graphllm1.bin")  # another SoC's binary
    again = read_binaries_target(root, memo_path=memo)
    assert again is not None and again.soc_ids == (57, 69), "the new binary's target was read, not remembered"


def test_a_refusal_is_remembered_with_its_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, memo = _export(tmp_path, SM8750, SM8750), tmp_path / "memo.json"
    damaged = root / "qnn" / "graphllm1.bin"
    damaged.write_bytes(damaged.read_bytes()[:4096])
    first = read_binaries_target(root, memo_path=memo)
    assert first is not None and first.read == ("qnn/graphllm0.bin",) and len(first.refused) == 1
    assert first.refused[0].startswith("qnn/graphllm1.bin: ")
    _no_reading(monkeypatch)
    again = read_binaries_target(root, memo_path=memo)
    assert again is not None and again.refused == first.refused and again.read == first.read


def test_a_programs_delegates_are_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "et"
    root.mkdir()
    shutil.copy(et_qnn_or_skip("pte", "lnprobe-8a8w-sa8295.pte"), root / "model.pte")
    memo = tmp_path / "memo.json"
    first = read_binaries_target(root, memo_path=memo)
    assert first is not None and first.read == ("model.pte#forward[0]",) and first.htp_archs == ("v68",)
    _no_reading(monkeypatch)
    again = read_binaries_target(root, memo_path=memo)
    assert again is not None and (again.read, again.soc_ids, again.builds) == (first.read, first.soc_ids, first.builds)


def test_another_library_or_a_corrupt_memo_reads_again(tmp_path: Path) -> None:
    root, memo = _export(tmp_path, SM8750), tmp_path / "memo.json"
    read_binaries_target(root, memo_path=memo)
    (key,) = json.loads(memo.read_text())["files"]
    other = ReadMemo("/elsewhere/libQnnSystem.so|1|1", memo)
    assert other.get(key.split("\n", 1)[1]) is None, "a memo entry is the reader's own"
    memo.write_text("{not json")
    calls = []
    real = QnnSystemLib.read_file

    def counting(self: QnnSystemLib, path: Path, name: str, offset: int = 0, size: int | None = None) -> BinaryInfo:
        calls.append(name)
        return real(self, path, name, offset, size)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(QnnSystemLib, "read_file", counting)
        again = read_binaries_target(root, memo_path=memo)
    assert again is not None and again.soc_ids == (69,) and len(calls) == 1
    assert json.loads(memo.read_text())["version"] == 1, "the corrupt memo was replaced, atomically"
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_a_file_that_is_gone_is_forgotten(tmp_path: Path) -> None:
    root, memo = _export(tmp_path, SM8750, SM8750), tmp_path / "memo.json"
    read_binaries_target(root, memo_path=memo)
    (root / "qnn" / "graphllm1.bin").unlink()
    other = _export(tmp_path / "b", SM8650)
    read_binaries_target(other, memo_path=memo)  # a save: the vanished file's entry goes
    paths = [k.split("\n", 1)[1].rsplit("|", 2)[0] for k in json.loads(memo.read_text())["files"]]
    assert sorted(Path(p).name for p in paths) == ["graphllm0.bin", "graphllm0.bin"]
    assert str((root / "qnn" / "graphllm1.bin").resolve()) not in paths
