"""Localization on a device (issue 41.1): the debug program through ExecuTorch's runner contract on the
virtual SM8650 phone (adb). The cheap cases need no lowering: what fails before ExecuTorch loads the
program (a runtime folder without qnn_executor_runner, without the arch's Skel, a runner that dies)
must be a named failure from the catalogue. The real one runs the session's faulty debug build
(tests/localize_kit) on the virtual phone's real ExecuTorch and names the planted op; a second push
of the same debug build sends nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.checks.localize import DebugFiles, localize
from harness.evidence import Outcome
from harness.provision import provision_runtime
from harness.runners.executorch import DebugRunFailed, run_on_device
from harness.runners.executorch.localize import push_debug_set
from tests.localize_kit import DEBUG_FAULT
from virtual_lab.runtime import make_runtime_dir

pytestmark = [pytest.mark.timeout(900)]
PHONE, ARCH = "sm8650-qrd", "v75"


def _small_build(folder: Path) -> DebugFiles:
    """A debug build's four files, enough for everything before ExecuTorch reads the program."""
    folder.mkdir(parents=True)
    (folder / "debug.pte").write_bytes(b"\x08\x00\x00\x00ET12 not a program")
    (folder / "etrecord.bin").write_bytes(b"not read before the run")
    np.savez(folder / "debug_inputs.npz", input_0=np.arange(4, dtype=np.int64))
    (folder / "qnn_encodings.json").write_text(json.dumps({"format": "16a8w", "nodes": [{"name": "x", "shape": [4]}]}))
    return DebugFiles(folder)


def _runtime(tmp_path: Path, drop: tuple[str, ...] = (), dies: bool = False) -> Path:
    rt = make_runtime_dir(tmp_path / "rt", ARCH, kind="executorch")
    for name in drop:
        (rt / name).unlink()
    if dies:  # a runner killed by a signal mid-run, as a crashing native runner
        (rt / "qnn_executor_runner").write_text("#!/system/bin/sh\necho 'I start'\nkill -SEGV $$\n")
        (rt / "qnn_executor_runner").chmod(0o755)
    return rt


def _fail(vlab_transport, tmp_path: Path, rt: Path, gone: str = "") -> DebugRunFailed:
    t = vlab_transport(PHONE)
    runtime = provision_runtime(t, rt, need_qnn=True)
    if gone:  # a library removed from the device after the push
        t.remove(f"{runtime.remote_dir}/{gone}")
    with pytest.raises(DebugRunFailed) as failed:
        run_on_device(_small_build(tmp_path / "build"), tmp_path / "work", t, runtime, f"{t.device.work_dir}/et-runs",
                      timeout_s=120)
    return failed.value


def test_a_runtime_without_qnn_executor_runner_is_a_named_failure(vlab_transport, tmp_path: Path) -> None:
    exc = _fail(vlab_transport, tmp_path, _runtime(tmp_path, drop=("qnn_executor_runner",)))
    assert exc.cls == "library-missing" and exc.ids == ("runner-not-found",), exc
    assert "qnn_executor_runner: No such file or directory" in str(exc) and "harness push --runtime" in str(exc)


def test_a_runtime_without_the_arch_skel_is_a_named_failure(vlab_transport, tmp_path: Path) -> None:
    exc = _fail(vlab_transport, tmp_path, _runtime(tmp_path), gone=f"libQnnHtpV{ARCH[1:]}Skel.so")
    assert exc.cls == "qnn-library-missing" and "et-qnn-libs-missing" in exc.ids, exc
    assert f"libQnnHtpV{ARCH[1:]}Skel.so" in str(exc)


def test_a_runner_that_dies_is_a_named_failure(vlab_transport, tmp_path: Path) -> None:
    exc = _fail(vlab_transport, tmp_path, _runtime(tmp_path, dies=True))
    assert exc.cls == "crash", exc


@pytest.mark.real_qnn
@pytest.mark.slow
@pytest.mark.heavy
def test_the_planted_op_is_named_on_the_virtual_phone_and_pushed_once(
        vlab_transport, tmp_path: Path, localize_fault_export: Path) -> None:
    from tests.localize_kit import host_env

    host_env()  # skips without the qnn extra
    t = vlab_transport(PHONE)
    runtime = provision_runtime(t, _runtime(tmp_path), need_qnn=True)
    export = DebugFiles(localize_fault_export)
    done = run_on_device(export, tmp_path / "work", t, runtime, f"{t.device.work_dir}/et-runs")
    result = localize(done.files)
    planted = str(json.loads(export.path("qnn_encodings.json").read_text())["planted_fault"])
    assert result.outcome is Outcome.DEPARTED and result.first is not None, result.summary()
    assert result.first.layer == f"layers.{DEBUG_FAULT.fault_layer}" and "mul" in result.first.target, result.summary()
    assert result.first.node == planted, (planted, result.summary())
    again = push_debug_set(export, tmp_path / "work", t)
    assert again.files_sent == 0 and again.bytes_sent == 0  # the debug build is on the phone already


@pytest.mark.real_qnn
@pytest.mark.slow
@pytest.mark.heavy
def test_a_debug_buffer_too_small_is_a_named_failure(vlab_transport, tmp_path: Path, localize_debug_export: Path) -> None:
    from tests.localize_kit import host_env

    host_env()
    build = tmp_path / "undersized"
    shutil.copytree(localize_debug_export, build)
    enc = json.loads((build / "qnn_encodings.json").read_text())
    for node in enc["nodes"]:
        node["shape"] = [1]  # the buffer is sized from these: 64 KiB for a program that needs ~1.2 MB
    (build / "qnn_encodings.json").write_text(json.dumps(enc))
    t = vlab_transport(PHONE)
    runtime = provision_runtime(t, _runtime(tmp_path), need_qnn=True)
    with pytest.raises(DebugRunFailed) as failed:
        run_on_device(DebugFiles(build), tmp_path / "work", t, runtime, f"{t.device.work_dir}/et-runs")
    assert "et-debug-buffer-too-small" in failed.value.ids, failed.value
    assert "Ran out of space to store intermediate outputs" in str(failed.value)


def test_a_reused_work_folder_compares_against_this_builds_etrecord(tmp_path: Path) -> None:
    """A work folder that held another build's run kept that build's ETRecord and encodings: every op
    was compared against the wrong graph (found on the car board: the embedding at -12 dB)."""
    from harness.runners.executorch.localize import _copy_compared

    work = tmp_path / "work"
    work.mkdir()
    (work / "etrecord.bin").write_bytes(b"another build's ETRecord")
    build = _small_build(tmp_path / "build")
    _copy_compared(build, work)
    assert (work / "etrecord.bin").read_bytes() == build.path("etrecord.bin").read_bytes()
