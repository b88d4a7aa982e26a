"""`python -m harness.qnn.compiled_io` and read_compiled_io with the host's libQnnSystem.so as the
source: real PTEs and context binaries from ../shared (targets SA8295, SM8650, SM8750), an
ExecuTorch export folder, an MNN-layout export whose stub and binaries disagree, corrupted copies
(exit 4, the file named), and today's sources when the library is switched off."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.qnn import HOST_QNN_SWITCH
from harness.qnn.compiled_io import SOURCE_QNNLIB, read_compiled_io
from harness.qnn.compiled_io.cli import main
from tests.qnn.material import et_qnn_or_skip, wheel_or_skip
from virtual_lab.exports import make_qwen3_export

pytestmark = pytest.mark.real_qnn
REPO = Path(__file__).resolve().parents[2]


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict, str]:
    rc = main([*args, "--json"])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if out.out.strip() else {}), out.err


@pytest.fixture(autouse=True)
def _real_material() -> None:
    wheel_or_skip()
    et_qnn_or_skip("pte")


def test_a_pte_prints_its_target_build_and_tensors(capsys: pytest.CaptureFixture[str]) -> None:
    rc, rep, err = _cli(capsys, str(et_qnn_or_skip("pte", "lnprobe-8a8w-sa8295.pte")))
    assert rc == 0, err
    assert (rep["kind"], rep["source"], rep["soc_model"], rep["htp_arch"]) == ("pte", SOURCE_QNNLIB, 39, "v68")
    assert rep["qairt_build"] == "v2.49.40.260810104044"
    [b] = rep["binaries"]
    assert b["soc"] == "SA8295" and b["context_blob_version"] == "4.0.4"
    [g] = b["graphs"]
    assert [(t["name"], t["dims"], t["dtype"]) for t in g["inputs"]] == [
        ("input_0_input_1@0", [1, 32, 128], "QNN_DATATYPE_FLOAT_32")]


def test_a_raw_binary_prints_its_encodings(capsys: pytest.CaptureFixture[str]) -> None:
    rc, rep, _ = _cli(capsys, str(et_qnn_or_skip("ctx", "lnprobe-qio-16a4w-ln16a16w-sm8750.bin")))
    assert rc == 0 and (rep["kind"], rep["soc_model"], rep["htp_arch"]) == ("binary", 69, "v79")
    t = rep["binaries"][0]["graphs"][0]["inputs"][0]
    assert t["dtype"] == "QNN_DATATYPE_UFIXED_POINT_16"
    assert t["encoding"]["kind"] == "scale_offset" and t["encoding"]["scale_offset"][0]["offset"] == -34332


def test_an_executorch_export_folder_has_its_target_from_the_binaries(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    export = tmp_path / "kv"
    export.mkdir()
    shutil.copy(et_qnn_or_skip("llm", "kv-16a8w-sm8650.pte"), export / "model.pte")
    shutil.copy(et_qnn_or_skip("llm", "tokenizer.json"), export / "tokenizer.json")
    io = read_compiled_io(export)
    assert (io.target.soc_id, io.target.dsp_arch, io.target.source) == (57, "v75", SOURCE_QNNLIB)
    assert list(io.direct) == ["model.pte"] and len(io.direct["model.pte"].binaries) == 2
    assert "libQnnSystem.so" in io.reader and not io.problems
    rc, rep, _ = _cli(capsys, str(export))
    assert rc == 0 and (rep["kind"], rep["soc_model"], rep["htp_arch"]) == ("export", 57, "v75")
    assert [b["path"] for b in rep["binaries"]] == ["model.pte#forward[0]", "model.pte#forward[1]"]


def test_an_mnn_export_reads_its_binaries_and_says_when_the_stub_disagrees(tmp_path: Path) -> None:
    pytest.importorskip("MNN", reason="reading the NPU stub needs the mnn extra")
    info = make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=2, sidecar=False, soc_id=57, dsp_arch="v75")
    real = et_qnn_or_skip("ctx", "lnprobe-qio-16a4w-ln16a16w-sm8750.bin")
    for n in range(2):
        shutil.copy(real, info.path / "qnn" / f"graphllm{n}.bin")
    io = read_compiled_io(info.path)
    bins = io.stubs["llm"].binaries
    assert {b.source for b in bins} == {SOURCE_QNNLIB} and {b.soc_id for b in bins} == {69}
    assert (io.target.soc_id, io.target.dsp_arch, io.target.source) == (69, "v79", SOURCE_QNNLIB)
    assert any("graph 'forward' is not among the stub's allGraphName" in p for p in io.problems), io.problems


def test_corrupted_copies_exit_4_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pte = et_qnn_or_skip("pte", "qwen3-16a4w-sm8650.pte").read_bytes()
    binary = et_qnn_or_skip("ctx", "qwen3-16a4w-sm8650.bin").read_bytes()
    cases = {"cut.pte": pte[:300_000], "head.pte": pte[:1400], "cut.bin": binary[:150_000],
             "noise.bin": bytes(range(256)) * 64, "zip.pte": b"PK\x03\x04" + bytes(400)}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        rc, rep, err = _cli(capsys, str(tmp_path / name))
        assert rc == 4 and rep == {} and f"{tmp_path / name}" in err, (name, err)
    rc, _, err = _cli(capsys, str(tmp_path / "absent.pte"))
    assert rc == 4 and "no such file or folder" in err
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "model.pte").write_bytes(pte[:300_000])
    rc, rep, err = _cli(capsys, str(folder))
    assert rc == 4 and "model.pte: truncated" in err and rep["problems"]


def test_without_the_library_todays_sources_are_used_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(HOST_QNN_SWITCH, "off")
    pte = et_qnn_or_skip("pte", "lnprobe-8a8w-sa8295.pte")
    rc, _, err = _cli(capsys, str(pte))
    assert rc == 4 and "nothing here can read it" in err and "HARNESS_HOST_QNN=off" in err
    export = tmp_path / "e"
    export.mkdir()
    shutil.copy(pte, export / "model.pte")
    io = read_compiled_io(export)
    assert io.target.source == "unknown" and "model.pte" in io.unread["binaries"]
    assert io.reader.startswith("no host QAIRT library (HARNESS_HOST_QNN=off")


def test_the_module_prints_clean_json_on_stdout() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", HOST_QNN_SWITCH)}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-m", "harness.qnn.compiled_io", str(et_qnn_or_skip("llm", "kv-16a8w-sm8650.pte")),
                           "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["soc_model"] == 57 and len(rep["binaries"]) == 2


def test_a_binary_newer_than_its_reader_is_a_problem_naming_both(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from tests.qnn.material import NEWER_CTX, pte_with_context

    rc, rep, err = _cli(capsys, str(NEWER_CTX))  # ORT's QNN EP on QAIRT 2.51.0, SM8650
    assert rc == 4 and (rep["soc_model"], rep["htp_arch"]) == (57, "v75")
    assert rep["qairt_build"] == "v2.51.0.260929181845"
    assert "built by QAIRT 2.51.0" in err and "newer than this reader's QAIRT 2.49.40" in err
    pte = pte_with_context(et_qnn_or_skip("pte", "qwen3-16a4w-sm8650.pte"), NEWER_CTX.read_bytes(), tmp_path / "m.pte")
    rc, rep, err = _cli(capsys, str(pte))
    assert rc == 4 and rep["binaries"][0]["qairt_build"] == "v2.51.0.260929181845" and "m.pte#forward[0]" in err
    rc, rep, err = _cli(capsys, str(et_qnn_or_skip("pte", "qwen3-16a4w-sm8650.pte")))  # the reader's own QAIRT
    assert rc == 0 and not rep["problems"], err


def test_a_folder_says_what_it_read_and_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, rep, err = _cli(capsys, str(et_qnn_or_skip()))  # ../shared's material: programs only in subfolders
    assert rc == 4 and not rep["binaries"]
    assert "read nothing: no export here" in err and "its programs and binaries are in ctx/, etdump/, llm/, pte/" in err
    info = make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=3, sidecar=False, soc_id=57, dsp_arch="v75")
    for b in (info.path / "qnn").glob("graph*.bin"):
        b.unlink()
    rc, rep, err = _cli(capsys, str(info.path))
    assert rc == 4 and len(rep["binaries"]) == 3
    assert "3 of the 3 context binaries its stub names are missing (qnn/graphllm0.bin" in err
