"""The runtime of an emulated HTP (`htp: emulator`): the host's x86 QAIRT libraries
(harness/qnn/host.py) take the place of the Android ones, through the runner's environment
only; a host without QNN, a folder without libQnnHtp.so and a QAIRT ExecuTorch cannot drive
are refused before anything is provisioned, naming what to do."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import yaml

from harness.errors import HarnessError
from harness.inventory import load_inventory
from harness.provision import provision_emulator_runtime
from harness.qnn import host as qnn_host
from harness.transport import LocalTransport


def _device(tmp_path: Path, **extra):
    inv = tmp_path / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{"name": "emu", "transport": "local", "soc": "SM8650",
                                                "htp": "emulator", "work_dir": str(tmp_path / "w"), **extra}]}))
    return load_inventory(inv).get("emu")


def test_a_folder_without_libqnnhtp_is_refused_before_anything_is_provisioned(tmp_path: Path) -> None:
    (tmp_path / "sdk" / "lib" / "x86_64-linux-clang").mkdir(parents=True)
    with pytest.raises(HarnessError) as err:
        provision_emulator_runtime(LocalTransport(_device(tmp_path)), qnn_sdk=tmp_path / "sdk", environ={})
    assert "libQnnHtp.so" in str(err.value) and "harness[qnn]" in str(err.value)
    assert not (tmp_path / "w").exists()  # nothing was provisioned


def test_no_host_qnn_at_all_is_refused_with_the_install(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(HarnessError, match=r"pip install 'harness\[qnn\]'"):
        provision_emulator_runtime(LocalTransport(_device(tmp_path)), environ={})
    assert not (tmp_path / "w").exists()


def test_a_qairt_executorch_cannot_drive_is_refused_naming_both(tmp_path: Path, monkeypatch) -> None:
    bad = qnn_host.HostQnn(Path("/q/lib"), Path("/q"), "v2.51.0.250101000000", "$QNN_SDK_ROOT")
    monkeypatch.setattr("harness.provision.emulator.find_host_qnn", lambda *_a, **_k: bad)
    monkeypatch.setattr(qnn_host, "_installed_executorch", lambda: "1.5.1")
    with pytest.raises(HarnessError) as err:
        provision_emulator_runtime(LocalTransport(_device(tmp_path)), environ={})
    assert "ExecuTorch 1.5.1" in str(err.value) and "QAIRT 2.51.0" in str(err.value)
    assert not (tmp_path / "w").exists()


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime_qnn") is None,
                    reason="needs the optional `qnn` extra (pip install 'harness[qnn]')")
def test_the_installed_wheel_is_the_emulators_qnn(tmp_path: Path) -> None:
    before = dict(os.environ)
    runtime = provision_emulator_runtime(LocalTransport(_device(tmp_path)))
    assert os.environ == before  # the harness's own environment is never changed
    env = runtime.env()
    lib = Path(env["LD_LIBRARY_PATH"].split(":")[0])
    assert (lib / "libQnnHtp.so").is_file() and runtime.qnn and runtime.htp_arch == "v75"
    assert Path(runtime.runner).name == "qnn_llama_runner" and (Path(runtime.remote_dir) / "pte_runner").is_file()
    assert qnn_host.find_host_qnn().qairt_version == "2.49.40"  # onnxruntime-qnn 2.5.0, read from the library
    assert runtime.qairt_build == qnn_host.find_host_qnn().qairt_build
    from harness.provision import device_status

    status = str(device_status(LocalTransport(_device(tmp_path))))
    assert "qnn_llama_runner v75 emulator QAIRT 2.49.40" in status and "cpu-only" not in status, status
    assert Path(env["QNN_SDK_ROOT"]) / "lib" / "x86_64-linux-clang" == lib
