"""harness.qnn.host over the real onnxruntime-qnn wheel: found, laid out, its QAIRT version read
from libQnnHtp.so itself; the environment for children is a copy; a measured-bad ExecuTorch /
QAIRT pairing is refused before anything runs; nothing found is a clear error."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from harness.qnn import HostQnn, QnnAbiMismatch, QnnPairingUnverified, QnnUnavailable, check_executorch_pairing, find_host_qnn
from harness.qnn import host as qnn_host
from tests.qnn.material import et_qnn_or_skip, wheel_or_skip

pytestmark = pytest.mark.real_qnn

BUILD_RE = re.compile(r"^v\d+\.\d+\.\d+\.\d{12}$")


def _wheel_host(tmp_path: Path) -> HostQnn:
    wheel_or_skip()
    return find_host_qnn(environ={}, cache_dir=tmp_path / "cache")


def test_wheel_found_and_its_version_read_from_the_library(tmp_path: Path) -> None:
    h = _wheel_host(tmp_path)
    dist = importlib.metadata.version("onnxruntime-qnn")
    assert h.source == f"onnxruntime-qnn {dist} wheel"
    assert h.read_by == "QnnInterface backendGetBuildId"
    assert BUILD_RE.match(h.qairt_build), h.qairt_build
    if dist == "2.5.0":
        assert h.qairt_version == "2.49.40"
    spec = importlib.util.find_spec("onnxruntime_qnn")
    assert spec is not None and spec.submodule_search_locations
    pkg = Path(list(spec.submodule_search_locations)[0])
    assert h.htp_lib.resolve() == (pkg / "libQnnHtp.so").resolve()
    assert h.system_lib.resolve() == (pkg / "libQnnSystem.so").resolve()
    libcxx = [p for p in h.lib_dir.iterdir() if p.name.startswith("libc++")]
    assert libcxx and all(p.resolve().parent.name == "onnxruntime_qnn.libs" for p in libcxx)
    assert h.sdk_root.parent == tmp_path / "cache" / "qnn-sdk"
    assert not [p for p in h.sdk_root.parent.iterdir() if ".tmp-" in p.name]


def test_the_layout_is_reused_and_a_broken_one_rebuilt(tmp_path: Path) -> None:
    first = _wheel_host(tmp_path)
    again = find_host_qnn(environ={}, cache_dir=tmp_path / "cache")
    assert again.sdk_root == first.sdk_root
    (first.lib_dir / "libQnnSystem.so").unlink()
    (first.lib_dir / "libQnnSystem.so").symlink_to(tmp_path / "gone.so")
    fixed = find_host_qnn(environ={}, cache_dir=tmp_path / "cache")
    assert fixed.system_lib.resolve().name == "libQnnSystem.so" and fixed.system_lib.resolve().is_file()


def test_an_sdk_folder_is_taken_from_the_option_or_the_environment(tmp_path: Path) -> None:
    wheel = _wheel_host(tmp_path)
    sdk = tmp_path / "sdk"
    (sdk / "lib" / "x86_64-linux-clang").mkdir(parents=True)
    for p in wheel.lib_dir.iterdir():
        (sdk / "lib" / "x86_64-linux-clang" / p.name).symlink_to(p.resolve())
    by_option = find_host_qnn(sdk, environ={"QNN_SDK_ROOT": str(tmp_path / "elsewhere")})
    assert (by_option.source, by_option.sdk_root, by_option.qairt_build) == ("--qnn-sdk", sdk, wheel.qairt_build)
    by_env = find_host_qnn(environ={"QNN_SDK_ROOT": str(sdk)})
    assert (by_env.source, by_env.lib_dir) == ("$QNN_SDK_ROOT", sdk / "lib" / "x86_64-linux-clang")


def test_child_env_is_a_copy_and_lets_a_child_load_the_libraries_by_name(tmp_path: Path) -> None:
    h = _wheel_host(tmp_path)
    before = dict(os.environ)
    base = {"PATH": os.environ.get("PATH", ""), "LD_LIBRARY_PATH": "/opt/x:" + str(h.lib_dir)}
    env = h.child_env(base)
    assert dict(os.environ) == before
    assert base["LD_LIBRARY_PATH"] == "/opt/x:" + str(h.lib_dir)
    assert env["LD_LIBRARY_PATH"] == f"{h.lib_dir}:/opt/x"
    assert env["QNN_SDK_ROOT"] == str(h.sdk_root)
    # The loader reads LD_LIBRARY_PATH at process start: a child finds the libraries by soname.
    code = "import ctypes; ctypes.CDLL('libQnnSystem.so'); ctypes.CDLL('libHtpPrepare.so'); print('loaded')"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "loaded" in proc.stdout, proc.stderr
    bare = subprocess.run([sys.executable, "-c", code], env=base | {"LD_LIBRARY_PATH": ""}, capture_output=True,
                          text=True, timeout=60)
    assert bare.returncode != 0


def _measured_bad_builds() -> dict[str, str]:
    """QAIRT version -> the build string the failing runs logged (abi/run-qairt-*.log)."""
    out = {}
    for log in sorted(et_qnn_or_skip("abi").glob("run-qairt-*.log")):
        m = re.search(r"QAIRT build (v[\d.]+)", log.read_text())
        assert m, log
        out[log.stem.removeprefix("run-qairt-")] = m.group(1)
    return out


def _host_of(build: str) -> HostQnn:
    return HostQnn(Path("/nowhere/lib/x86_64-linux-clang"), Path("/nowhere"), build, "--qnn-sdk")


def test_the_measured_bad_pairings_are_refused_naming_both_versions() -> None:
    bad = _measured_bad_builds()
    assert set(bad) == {"2.48.40", "2.50.40", "2.51.0"}
    for version, build in bad.items():
        assert _host_of(build).qairt_version == version
        with pytest.raises(QnnAbiMismatch) as err:
            check_executorch_pairing(_host_of(build), "1.5.1+cpu")
        msg = str(err.value)
        assert "ExecuTorch 1.5.1+cpu" in msg and f"QAIRT {version}" in msg and "onnxruntime-qnn==2.5.0" in msg


def test_the_working_pairing_passes_silently_and_an_unknown_one_warns(tmp_path: Path) -> None:
    h = _wheel_host(tmp_path)
    if h.qairt_version != "2.49.40":
        pytest.skip(f"the installed wheel is QAIRT {h.qairt_version}, not 2.49.40")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_executorch_pairing(h, "1.5.1")
    with pytest.warns(QnnPairingUnverified, match="ExecuTorch 1.6.0 with QAIRT 2.49.40"):
        check_executorch_pairing(h, "1.6.0")
    with pytest.warns(QnnPairingUnverified, match="QAIRT 2.52.10"):
        check_executorch_pairing(_host_of("v2.52.10.261001000000"), "1.5.1")


def test_a_library_that_cannot_load_is_read_by_its_build_string(tmp_path: Path) -> None:
    # Not an ELF file: the ctypes read fails in the child, the fallback reads the embedded string.
    sdk = tmp_path / "sdk"
    lib = sdk / "lib" / "x86_64-linux-clang"
    lib.mkdir(parents=True)
    (lib / "libQnnHtp.so").write_bytes(b"\0junk qnn build v2.50.40.260831140417 more\0")
    (lib / "libQnnSystem.so").write_bytes(b"\0")
    h = find_host_qnn(sdk, environ={})
    assert h.qairt_build == "v2.50.40.260831140417" and h.read_by.startswith("byte scan of the library")
    with pytest.raises(QnnAbiMismatch, match="QAIRT 2.50.40"):
        check_executorch_pairing(h, "1.5.1")


def test_nothing_found_says_what_was_looked_at_and_how_to_fix_it(tmp_path: Path, monkeypatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime_qnn" else real_find_spec(name, *a))
    with pytest.raises(QnnUnavailable) as err:
        find_host_qnn(environ={})
    msg = str(err.value)
    assert "QNN_SDK_ROOT not set" in msg and "pip install 'harness[qnn]'" in msg and "--qnn-sdk" in msg
    empty = tmp_path / "empty-sdk"
    empty.mkdir()
    with pytest.raises(QnnUnavailable, match=r"--qnn-sdk .*empty-sdk.*libQnnHtp.so, libQnnSystem.so"):
        find_host_qnn(empty, environ={})
    with pytest.raises(QnnUnavailable, match=r"QNN_SDK_ROOT=.*empty-sdk.*unset it"):
        find_host_qnn(environ={"QNN_SDK_ROOT": str(empty)})


def test_the_build_id_tool_prints_one_json_line(tmp_path: Path) -> None:
    h = _wheel_host(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "harness.qnn.buildid", str(h.htp_lib)], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2])))
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["build_id"] == h.qairt_build and found["backend_id"] == 6 and found["provider"] == "HTP_QTI_AISW"
    bad = subprocess.run([sys.executable, "-m", "harness.qnn.buildid", str(tmp_path / "none.so")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "not a loadable QNN backend library" in bad.stderr


def test_the_automatic_use_honours_the_switch_and_falls_through_a_device_only_sdk(tmp_path: Path) -> None:
    wheel_or_skip()
    off, why = qnn_host.auto_host_qnn(None, {"HARNESS_HOST_QNN": "off"})
    assert off is None and why.startswith("HARNESS_HOST_QNN=off")
    device_only = tmp_path / "sdk"
    (device_only / "lib" / "aarch64-android").mkdir(parents=True)
    host, why = qnn_host.auto_host_qnn(device_only, {})
    assert host is not None and host.source.startswith("onnxruntime-qnn") and why == ""
    assert qnn_host.qairt_tuple(host.qairt_build) == tuple(int(x) for x in host.qairt_version.split("."))


def test_build_id_is_read_once_a_machine_then_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The API read costs a child process; a second process (an empty lru cache) reads the
    remembered answer for the same file, and a changed file (other mtime) is read again."""
    host = _wheel_host(tmp_path)
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "memo"))
    calls: list[str] = []
    real = qnn_host._read_in_child

    def counting(path: str) -> tuple[str, str]:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(qnn_host, "_read_in_child", counting)
    qnn_host._read_cached.cache_clear()
    first = qnn_host.read_qairt_build(host.htp_lib)
    qnn_host._read_cached.cache_clear()
    second = qnn_host.read_qairt_build(host.htp_lib)
    assert first == second and first[0] == host.qairt_build
    assert len(calls) == 1, calls
    st = host.htp_lib.stat()
    qnn_host._read_cached.cache_clear()
    qnn_host._read_cached(str(host.htp_lib.resolve()), st.st_size, st.st_mtime_ns + 1)
    assert len(calls) == 2, "a changed library is read again, not taken from the cache"
    qnn_host._read_cached.cache_clear()


def test_a_bad_qnn_sdk_is_an_error_never_the_wheel_in_its_place(tmp_path: Path) -> None:
    """--qnn-sdk naming no folder: no library at all, the reason naming the option (issue 36);
    a folder without x86 libraries (a device-only SDK): the wheel reads, and its source says why."""
    wheel_or_skip()
    host, why = qnn_host.auto_host_qnn(tmp_path / "no-such-sdk", environ={})
    assert host is None and f"--qnn-sdk {tmp_path / 'no-such-sdk'}: not a folder" in why
    device_only = tmp_path / "sdk"
    (device_only / "lib" / "aarch64-android").mkdir(parents=True)
    host, why = qnn_host.auto_host_qnn(device_only, environ={})
    assert host is not None and f"--qnn-sdk {device_only} has no x86 libraries" in host.source, (host, why)


def test_the_build_id_is_read_in_a_bare_environment(tmp_path: Path, monkeypatch) -> None:
    """`env -i` (a cron job, a CI step): QNN's library prints "# LIBNATIVE: ..." after the
    reader's JSON line; the build id is still read by QNN's own call, not an internal error."""
    h = _wheel_host(tmp_path)
    for name in list(os.environ):
        if name not in ("PATH", "PYTHONPATH"):
            monkeypatch.delenv(name)
    build, read_by = qnn_host._read_in_child(str(h.lib_dir / "libQnnHtp.so"))
    assert BUILD_RE.match(build) and read_by == "QnnInterface backendGetBuildId", (build, read_by)


def test_an_unwritable_cache_folder_is_a_clear_unavailable_not_a_traceback(tmp_path: Path) -> None:
    wheel_or_skip()
    (tmp_path / "home").write_text("a file where the cache's folder would be, as a read-only home refuses it")
    with pytest.raises(QnnUnavailable, match="HARNESS_CACHE_DIR"):
        find_host_qnn(environ={}, cache_dir=tmp_path / "home" / "cache")
