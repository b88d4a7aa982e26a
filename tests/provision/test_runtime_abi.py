"""A runner built for another machine is refused before a byte moves (issue 21): the ELF
header says which ABI each file of the runtime needs, the device says which it runs
(Android's ro.product.cpu.abilist over adb, `uname -m` elsewhere)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from harness.errors import ProvisionError
from harness.provision import NullProgress, abi_of, device_abis, provision_runtime, read_machine
from harness.transport import LocalTransport
from tests.provision.conftest import local_device

EM = {"aarch64": 183, "x86_64": 62, "hexagon": 164, "arm": 40}


def tiny_elf(path: Path, machine: str, *, bits: int = 64, shared: bool = False) -> Path:
    """An ELF file with a header only (no segments, no sections): all the loader-independent
    facts the check reads."""
    if bits == 64:
        ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
        header = ident + struct.pack("<HHIQQQIHHHHHH", 3 if shared else 2, EM[machine], 1, 0, 0, 0, 0, 64, 56, 0, 64,
                                     0, 0)
    else:
        ident = b"\x7fELF" + bytes([1, 1, 1]) + bytes(9)
        header = ident + struct.pack("<HHIIIIIHHHHHH", 3 if shared else 2, EM[machine], 1, 0, 0, 0, 0, 52, 32, 0, 40,
                                     0, 0)
    path.write_bytes(header + b"\0" * 64)
    path.chmod(0o755)
    return path


def test_abi_names_on_both_sides(tmp_path):
    assert abi_of(*read_machine(tiny_elf(tmp_path / "a", "aarch64"))) == "arm64-v8a"
    assert abi_of(*read_machine(tiny_elf(tmp_path / "b", "x86_64"))) == "x86_64"
    assert abi_of(*read_machine(tiny_elf(tmp_path / "c", "arm", bits=32))) == "armeabi-v7a"
    assert device_abis("arm64-v8a,armeabi-v7a,armeabi", "arm64-v8a", "aarch64") == ("arm64-v8a", "armeabi-v7a")
    assert device_abis("", "arm64-v8a", "aarch64") == ("arm64-v8a",)  # an old Android: abi only
    assert device_abis("", "", "x86_64") == ("x86_64", "x86")  # an ssh board or the host
    assert device_abis("", "", "") == ()  # the device did not say: nothing is refused on a guess


def test_an_arm64_runner_is_refused_on_the_x86_64_host(tmp_path):
    runtime = tmp_path / "android-build"
    runtime.mkdir()
    runner = tiny_elf(runtime / "llm_demo", "aarch64")
    host = local_device(tmp_path / "host-work", soc_model="host", soc_id=0, htp_arch="", name="host")
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("the host is not x86_64")
    with pytest.raises(ProvisionError) as err:
        provision_runtime(LocalTransport(host), runtime, need_qnn=False, progress=NullProgress())
    said = str(err.value)
    assert f"{runner} is built for arm64-v8a" in said and "host runs x86_64" in said and "uname -m" in said
    assert not (tmp_path / "host-work").exists()  # nothing pushed


@pytest.fixture
def strict_phone(vlab_factory):
    """A virtual arm64 phone that says only what a real one says (no host ABI in its list)."""
    from virtual_lab.lab import LabDeviceConfig

    lab = vlab_factory(devices=[LabDeviceConfig("arm64-phone", props={"ro.product.cpu.abilist": "arm64-v8a,armeabi-v7a",
                                                                      "ro.product.cpu.abi": "arm64-v8a"})])
    from harness.transport import open_transport

    t = open_transport(lab.inventory.get("arm64-phone"))
    yield lab, t
    t.close()


def test_an_x86_64_runner_is_refused_on_an_arm64_phone_and_an_arm64_one_is_pushed(strict_phone, tmp_path):
    lab, t = strict_phone
    wrong = tmp_path / "x86-build"
    wrong.mkdir()
    runner = tiny_elf(wrong / "llm_demo", "x86_64")
    with pytest.raises(ProvisionError) as err:
        provision_runtime(t, wrong, need_qnn=False, progress=NullProgress())
    said = str(err.value)
    assert f"{runner} is built for x86_64" in said and "arm64-phone runs arm64-v8a, armeabi-v7a" in said
    assert "ro.product.cpu.abilist" in said and "nothing was pushed" in said
    assert not t.exists(f"{t.device.work_dir}/runtimes")

    # The same folder built for the phone: an arm64 runner, an arm64 library, and the DSP's
    # skeleton (Hexagon code, not the CPU's: never judged against the CPU ABI).
    right = tmp_path / "arm64-build"
    right.mkdir()
    tiny_elf(right / "llm_demo", "aarch64")
    tiny_elf(right / "libMNN.so", "aarch64", shared=True)
    tiny_elf(right / "libQnnHtpV79Skel.so", "hexagon", bits=32, shared=True)
    rt = provision_runtime(t, right, need_qnn=False, progress=NullProgress())
    assert rt.files_sent == 2 and t.exists(rt.runner)  # the v79 skeleton goes only with the QNN set

    # One library built for the host in an otherwise arm64 folder is named too.
    tiny_elf(right / "libllm.so", "x86_64", shared=True)
    with pytest.raises(ProvisionError, match=r"libllm\.so is built for x86_64"):
        provision_runtime(t, right, need_qnn=False, progress=NullProgress())


def test_harness_push_of_a_foreign_runner_exits_1_naming_it(tmp_path, capsys):
    """Through the console script: a clear line, exit 1 (the push failed), the claim released."""
    import platform

    import yaml

    from harness.cli import main
    from harness.lab import ExitCode, lock_state

    if platform.machine() != "x86_64":
        pytest.skip("the host is not x86_64")
    runtime = tmp_path / "android-build"
    runtime.mkdir()
    runner = tiny_elf(runtime / "llm_demo", "aarch64")
    inv = tmp_path / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{"name": "host", "transport": "local",
                                                "work_dir": str(tmp_path / "host-work")}]}))
    code = main(["--file", str(inv), "push", "--device", "host", "--runtime", str(runtime)])
    err = capsys.readouterr().err
    assert code == ExitCode.TESTS_FAILED, err
    assert f"{runner} is built for arm64-v8a" in err and "Traceback" not in err
    assert not lock_state(tmp_path / "locks", "host").held
