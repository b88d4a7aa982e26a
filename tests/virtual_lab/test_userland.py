"""The virtual phone's shell is Android's: mksh, toybox's Android applets, the shell user,
PATH without host folders, read-only /system and /vendor (virtual_lab.userland)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from virtual_lab.device import SHELL_PATH, VirtualDevice, VirtualDeviceSpec
from virtual_lab.userland import ANDROID_TOYBOX_APPLETS, find_userland


@pytest.fixture(scope="module")
def device(tmp_path_factory: pytest.TempPathFactory) -> VirtualDevice:
    # No adbd needed: the sandbox's own shell is what adbd runs commands in.
    return VirtualDevice(VirtualDeviceSpec(name="userland"), tmp_path_factory.mktemp("userland"))


def sh(dev: VirtualDevice, command: str) -> tuple[int, str, str]:
    res = dev.shell(command)
    return res.returncode, res.stdout.decode(), res.stderr.decode()


def test_shell_is_mksh_as_the_shell_user_with_androids_path(device):
    code, out, _ = sh(device, 'echo "$KSH_VERSION"; id -u; id -un; echo "$PATH"; readlink /system/bin/sh')
    lines = out.split("\n")
    assert code == 0 and "MIRBSD KSH" in lines[0]
    assert lines[1:4] == ["2000", "shell", "/system/bin:/system/xbin:/vendor/bin"] == ["2000", "shell", SHELL_PATH]
    assert lines[4].endswith("/mksh")


def test_no_host_program_is_on_path(device):
    for prog in ("bash", "dash", "python3", "perl", "gawk", "busybox", "coreutils"):
        code, out, _ = sh(device, f"command -v {prog}")
        assert code != 0 and out == "", f"{prog} is reachable on the virtual phone's PATH: {out!r}"


def test_tools_are_toybox_with_androids_applet_set(device):
    ul = find_userland()
    listed = set(os.listdir(device.root / "system/bin"))
    assert set(ul.applets) <= listed and "awk" in listed and "sh" in listed
    # Android's applets this toybox lacks are absent, not filled in from the host.
    for missing in ul.missing:
        code, _, _ = sh(device, f"command -v {shlex.quote(missing)}")
        assert code != 0
    # Debian's extras that Android does not have are not linked.
    assert not ({"ascii", "wget", "httpd", "sha3sum", "hexedit"} & listed)
    code, out, _ = sh(device, "ls /system/bin/ls >/dev/null && readlink /system/bin/ls && stat -c %s /system/bin/sh "
                              "&& echo a,b | awk -F, '{print $2}'")
    assert code == 0 and out.split("\n")[0].endswith("/toybox") and out.split("\n")[-2] == "b"
    assert {"tr", "dd", "expr", "diff", "gzip"} <= ANDROID_TOYBOX_APPLETS  # Android has them


def test_system_and_vendor_are_read_only_data_is_writable(device):
    for path in ("/system/x", "/vendor/x", "/vendor/lib64/x", "/system/bin/x"):
        code, _, _ = sh(device, f"touch {path}")
        assert code != 0, f"{path} is writable"
    code, out, _ = sh(device, "touch /data/local/tmp/ok && stat -c %u /data/local/tmp/ok && rm /data/local/tmp/ok")
    assert code == 0 and out.strip() == "2000"


def test_loader_libc_and_python_stay_reachable_by_absolute_path(device):
    py = os.path.realpath(sys.executable)
    code, out, err = sh(device, f"{shlex.quote(py)} -c 'import os; print(os.getuid())'")
    assert code == 0 and out.strip() == "2000", err
    assert Path("/usr/bin/toybox").exists()
