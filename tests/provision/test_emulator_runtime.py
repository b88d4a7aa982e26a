"""The runtime of an emulated HTP (`htp: emulator`): the host's x86 QAIRT libraries take the
place of the Android ones, through the runner's environment only; a host without QNN, a
folder without libQnnHtp.so and a QAIRT ExecuTorch cannot pair with are refused before
anything runs, naming what to do."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import yaml

from harness.errors import ProvisionError
from harness.inventory import load_inventory
from harness.provision import emulator
from harness.provision.emulator import HostQnn, check_executorch_pairing, find_host_qnn, provision_emulator_runtime
from harness.transport.local import LocalTransport


def _device(tmp_path: Path, **extra):
    inv = tmp_path / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{"name": "emu", "transport": "local", "soc": "SM8650",
                                                "htp": "emulator", "work_dir": str(tmp_path / "w"), **extra}]}))
    return load_inventory(inv).get("emu")


def test_a_folder_without_libqnnhtp_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "sdk" / "lib" / "x86_64-linux-clang").mkdir(parents=True)
    with pytest.raises(ProvisionError) as err:
        find_host_qnn(tmp_path / "sdk", environ={})
    assert "no libQnnHtp.so" in str(err.value) and "harness[qnn]" in str(err.value)
    assert str(tmp_path / "sdk" / "lib" / "x86_64-linux-clang") in str(err.value)


def test_no_host_qnn_at_all_is_refused_with_the_install(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(emulator.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ProvisionError, match=r"pip install 'harness\[qnn\]'"):
        provision_emulator_runtime(LocalTransport(_device(tmp_path)), environ={})
    assert not (tmp_path / "w").exists()  # nothing was provisioned


def test_a_qairt_executorch_cannot_pair_with_names_both_versions() -> None:
    host = HostQnn(Path("/q"), None, "v2.51.0.250101000000", "2.51.0", "onnxruntime-qnn")
    with pytest.raises(ProvisionError) as err:
        check_executorch_pairing(host, "1.5.1")
    assert "ExecuTorch 1.5.1" in str(err.value) and "QAIRT 2.51.0" in str(err.value) and "2.49.40" in str(err.value)
    check_executorch_pairing(HostQnn(Path("/q"), None, None, "2.49.40", "x"), "1.5.1")  # the working pair


def test_the_child_env_carries_qnn_and_keeps_the_users_path() -> None:
    host = HostQnn(Path("/qairt/lib"), Path("/qairt"), None, None, "--qnn-sdk")
    env = host.child_env({"LD_LIBRARY_PATH": "/mine", "HOME": "/h"})
    assert env["LD_LIBRARY_PATH"] == "/qairt/lib:/mine" and env["QNN_SDK_ROOT"] == "/qairt"


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
    assert find_host_qnn().qairt_version == "2.49.40"  # onnxruntime-qnn 2.5.0, read from the library itself
