"""The load preflight (harness/provision/preflight.py) on real QNN material: a context binary or
a program built by QAIRT 2.51.0 (fixtures/qnn_binaries) is refused before a byte moves, naming
both versions and the fix in the exporter's terms, whether the device's QAIRT is the host's (an
emulated HTP, `harness push`) or what its runtime manifest recorded; the same export from the
device's own QAIRT goes through."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.errors import ArtifactError
from harness.provision import LoadAxis, PreflightError, device_status, provision_model, provision_runtime
from harness.qnn import find_host_qnn
from harness.transport import LocalTransport
from tests.provision.conftest import local_device
from tests.qnn.material import NEWER_CTX, et_qnn_or_skip, pte_with_context, wheel_or_skip
from virtual_lab.exports import make_qwen3_export

pytestmark = pytest.mark.real_qnn


@pytest.fixture(autouse=True)
def _real_material() -> None:
    wheel_or_skip()


def _et_export(tmp_path: Path, *, newer: bool) -> Path:
    """A user's export as it comes: model.pte + tokenizer.json (SM8650); `newer`: its delegate's
    context binary built by QAIRT 2.51.0."""
    export = tmp_path / "et"
    export.mkdir(parents=True)
    src = et_qnn_or_skip("pte", "qwen3-16a4w-sm8650.pte")
    if newer:
        pte_with_context(src, NEWER_CTX.read_bytes(), export / "model.pte")
    else:
        shutil.copy(src, export / "model.pte")
    shutil.copy(et_qnn_or_skip("llm", "tokenizer.json"), export / "tokenizer.json")
    return export


def _emulator_inventory(tmp_path: Path) -> Path:
    inv = tmp_path / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{"name": "emu", "transport": "local", "soc": "SM8650",
                                                "htp": "emulator", "work_dir": str(tmp_path / "w")}]}))
    return inv


def test_harness_push_refuses_a_newer_qairt_program_for_the_emulator(tmp_path: Path, capsys) -> None:
    inv, locks = _emulator_inventory(tmp_path), str(tmp_path / "locks")
    export = _et_export(tmp_path / "new", newer=True)
    rc = main(["push", "--file", str(inv), "--device", "emu", "--lock-dir", locks, str(export)])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "QAIRT too new for the runtime" in err and "built by QAIRT 2.51.0 (v2.51.0.260929181845" in err
    assert "the host's QAIRT, the HTP emulator" in err and "is QAIRT 2.49.40" in err
    assert "re-lower with QAIRT 2.49.40" in err and "llama.py" in err  # ExecuTorch's terms, not MNN's
    assert "Traceback" not in err and not (tmp_path / "w" / "models").exists()  # nothing moved
    same = _et_export(tmp_path / "same", newer=False)
    assert main(["push", "--file", str(inv), "--device", "emu", "--lock-dir", locks, str(same)]) == 0
    assert (tmp_path / "w" / "models" / "et" / "model.pte").is_file()


def _mnn_export(tmp_path: Path) -> Path:
    """An MNN layout whose qnn/graphllm*.bin are the QAIRT 2.51.0 binary (SM8650, v75)."""
    info = make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=2, sidecar=False, soc_id=57, dsp_arch="v75")
    for n in range(2):
        shutil.copy(NEWER_CTX, info.path / "qnn" / f"graphllm{n}.bin")
    return info.path


def _sdk_with_host_qairt(tmp_path: Path) -> Path:
    """A QNN SDK folder whose libQnnHtp.so is the host's real QAIRT 2.49.40 library."""
    from virtual_lab.runtime import make_qnn_sdk

    sdk = make_qnn_sdk(tmp_path / "qnn-sdk", arches=("v75",))
    lib = sdk / "lib" / "aarch64-android" / "libQnnHtp.so"
    lib.unlink()
    lib.symlink_to(find_host_qnn().htp_lib.resolve())
    return sdk


def test_the_devices_runtime_manifest_decides_when_no_runtime_is_pushed(tmp_path: Path) -> None:
    from virtual_lab.runtime import make_runtime_dir

    export = _mnn_export(tmp_path)
    device = local_device(tmp_path / "dev", soc_model="SM8650", soc_id=57, htp_arch="v75")
    with LocalTransport(device) as t:
        provision_model(t, export)  # no runtime on the device: nothing to judge against, it goes
        sdk = _sdk_with_host_qairt(tmp_path)
        provision_runtime(t, make_runtime_dir(tmp_path / "rt", "v75", kind="mnn", with_qnn_libs=False), qnn_sdk=sdk)
        status = str(device_status(t))
        assert "llm_demo v75 QAIRT 2.49.40" in status, status
        with pytest.raises(PreflightError) as err:
            provision_model(t, export, name="again")
        assert err.value.axis is LoadAxis.QAIRT_TOO_NEW
        msg = str(err.value)
        assert "built by QAIRT 2.51.0" in msg and "qnn/graphllm0.bin" in msg
        assert "the runtime llm_demo-v75 on bench (its manifest) is QAIRT 2.49.40" in msg
        assert "--soc_id/--dsp_arch" in msg and "harness push --runtime DIR --qnn-sdk SDK" in msg
        assert not t.exists(f"{device.work_dir}/models/again")


def test_a_newer_binary_for_another_soc_names_the_soc_first(tmp_path: Path) -> None:
    export = _mnn_export(tmp_path)
    with LocalTransport(local_device(tmp_path / "dev")) as t:  # SM8750, v79
        with pytest.raises(ArtifactError) as err:
            provision_model(t, export)
    assert isinstance(err.value, PreflightError) and err.value.axis is LoadAxis.TARGET
    assert "wrong SoC/arch" in str(err.value) and "--soc_id 69 --dsp_arch v79" in str(err.value)


@pytest.mark.parametrize("version, loads", [("2.48.40", True), ("2.50.40", False), ("2.51.0", False)])
def test_binaries_of_other_releases_and_producers_are_read_and_judged(tmp_path: Path, version: str,
                                                                      loads: bool) -> None:
    from harness.provision import check_qairt, emulator_qairt, load_export

    info = make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=1, sidecar=False, soc_id=57, dsp_arch="v75")
    shutil.copy(NEWER_CTX.with_name(f"matmul64-sm8650-qairt{version}.bin"), info.path / "qnn" / "graphllm0.bin")
    art = load_export(info.path)
    assert art.target is not None and (art.target.soc_id, art.target.htp_arch) == (57, "v75")
    assert art.target.qairt_build is not None and art.target.qairt_build.startswith(f"v{version}.")
    if loads:
        check_qairt(art, emulator_qairt())
    else:
        with pytest.raises(PreflightError, match=f"built by QAIRT {version}"):
            check_qairt(art, emulator_qairt())


def test_the_hosts_same_qairt_smoke_loads_a_binary_its_header_reader_accepts(tmp_path: Path) -> None:
    from harness.hostfiles import user_cache_dir
    from harness.provision.preflight import SMOKE_MEMO

    good = et_qnn_or_skip("ctx", "qwen3-16a4w-sm8650.bin").read_bytes()
    info = make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=2, sidecar=False, soc_id=57, dsp_arch="v75")
    bad = bytearray(good)
    bad[8192:8192 + 4096] = b"\xa5" * 4096  # inside the graph: the header (socModel, QAIRT) still reads
    (info.path / "qnn" / "graphllm0.bin").write_bytes(good)
    (info.path / "qnn" / "graphllm1.bin").write_bytes(bytes(bad))
    inv = _emulator_inventory(tmp_path)
    from harness.inventory import load_inventory

    device = load_inventory(inv).get("emu")
    with LocalTransport(device) as t:
        for _ in range(2):  # the second time from the memo: the same verdict
            with pytest.raises(PreflightError) as err:
                provision_model(t, info.path)
            assert err.value.axis is LoadAxis.CORRUPT
            assert "the host's QAIRT 2.49.40" in str(err.value) and "err 5005" in str(err.value)
            assert "graphllm1.bin" in str(err.value) and not t.exists(f"{device.work_dir}/models")
    assert str((info.path / "qnn" / "graphllm1.bin").resolve()) in (user_cache_dir() / SMOKE_MEMO).read_text()


def test_a_binary_whose_build_string_cannot_be_read_is_still_smoke_loaded(tmp_path: Path) -> None:
    from harness.inventory import load_inventory

    damaged = NEWER_CTX.read_bytes().replace(b"v2.51.0.260929181845", b"v?.??.?.????????????")
    info = make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=1, sidecar=False, soc_id=57, dsp_arch="v75")
    (info.path / "qnn" / "graphllm0.bin").write_bytes(damaged)
    device = load_inventory(_emulator_inventory(tmp_path)).get("emu")
    with LocalTransport(device) as t:
        with pytest.raises(PreflightError) as err:
            provision_model(t, info.path)
        assert err.value.axis is LoadAxis.CORRUPT and "err 5000" in str(err.value)
        assert not t.exists(f"{device.work_dir}/models")


def test_an_unchanged_reprovision_reads_the_runtimes_qairt_in_its_first_round_trip(tmp_path: Path) -> None:
    from harness.provision.manifest import Manifest
    from tests.provision.conftest import CountingTransport

    info = make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=1)  # QAIRT 2.49.40, SM8750
    device = local_device(tmp_path / "dev")
    runtimes = tmp_path / "dev" / "manifests" / "runtimes"
    runtimes.mkdir(parents=True)

    def runtime(build: str) -> None:
        (runtimes / "rt.json").write_text(Manifest("runtime", "rt", remote_dir=f"{device.work_dir}/runtimes/rt",
                                                   meta={"qairt_build": build}).to_json())

    runtime("v2.49.40.260810104044")
    t = CountingTransport(device)
    provision_model(t, info.path)  # the first time from this host: the runtimes are listed
    t.shells = 0
    assert provision_model(t, info.path).bytes_sent == 0
    assert t.shells == 0, "no device command beyond the sync's first read"
    runtime("v2.45.0.250101000000")  # replaced by an older QAIRT: read from the same round trip
    with pytest.raises(PreflightError) as err:
        provision_model(t, info.path)
    assert err.value.axis is LoadAxis.QAIRT_TOO_NEW and "the runtime rt on bench (its manifest)" in str(err.value)
