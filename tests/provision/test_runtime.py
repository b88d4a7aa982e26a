"""Runtime bundles: runner + libraries, QNN libraries chosen by the device's HTP arch."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ArtifactError
from harness.provision import NullProgress, provision_runtime, resolve_runtime
from tests.provision.conftest import CountingTransport, local_device

Q = NullProgress()


@pytest.fixture
def sdk(tmp_path: Path) -> Path:
    from virtual_lab.runtime import make_qnn_sdk

    return make_qnn_sdk(tmp_path / "qnn-sdk", arches=("v75", "v79"))


def _bare(tmp_path: Path, kind: str = "mnn", arch: str = "v79") -> Path:
    from virtual_lab.runtime import make_runtime_dir

    return make_runtime_dir(tmp_path / f"rt-{kind}-{arch}", arch, kind=kind, with_qnn_libs=False)


def test_mnn_bundle_from_sdk_picks_the_device_arch(tmp_path, sdk):
    b = resolve_runtime(_bare(tmp_path), "v79", qnn_sdk=sdk)
    names = {f.rel: f for f in b.files}
    assert b.runner == "llm_demo"
    assert {"llm_demo", "llm_logits_diff", "libMNN.so", "libQnnHtp.so", "libQnnSystem.so", "libQnnHtpV79Stub.so",
            "libQnnHtpV79Skel.so"} == set(names)
    assert names["libQnnHtpV79Skel.so"].path == (sdk / "lib/hexagon-v79/unsigned/libQnnHtpV79Skel.so").resolve()
    assert names["llm_demo"].mode & 0o111


def test_executorch_bundle_needs_prepare_and_backend(tmp_path, sdk):
    b = resolve_runtime(_bare(tmp_path, "executorch"), "v75", qnn_sdk=sdk)
    names = {f.rel for f in b.files}
    assert b.runner == "qnn_llama_runner"
    assert {"libQnnHtpPrepare.so", "libqnn_executorch_backend.so", "libQnnHtpV75Stub.so",
            "libQnnHtpV75Skel.so"} <= names
    assert not any("V79" in n for n in names)


def test_online_mode_adds_prepare_for_llm_demo(tmp_path, sdk):
    b = resolve_runtime(_bare(tmp_path), "v79", qnn_sdk=sdk, online_prepare=True)
    assert "libQnnHtpPrepare.so" in {f.rel for f in b.files}


def test_plain_folder_with_libs_for_several_arches(tmp_path):
    from virtual_lab.runtime import make_runtime_dir

    rt = make_runtime_dir(tmp_path / "rt", "v79")
    make_runtime_dir(tmp_path / "rt75", "v75")
    for p in (tmp_path / "rt75").glob("libQnnHtpV75*"):
        (rt / p.name).write_bytes(p.read_bytes())
    names = {f.rel for f in resolve_runtime(rt, "v79").files}
    assert "libQnnHtpV79Skel.so" in names and not any("V75" in n for n in names)


def test_missing_libraries_are_named(tmp_path):
    with pytest.raises(ArtifactError) as err:
        resolve_runtime(_bare(tmp_path), "v79", env={})
    msg = str(err.value)
    for lib in ("libQnnHtp.so", "libQnnHtpV79Stub.so", "libQnnHtpV79Skel.so", "libQnnSystem.so"):
        assert lib in msg
    assert "--qnn-sdk" in msg


def test_wrong_arch_only_is_explained(tmp_path):
    from virtual_lab.runtime import make_runtime_dir

    rt = make_runtime_dir(tmp_path / "rt", "v75")
    with pytest.raises(ArtifactError) as err:
        resolve_runtime(rt, "v79", env={})
    assert "libQnnHtpV79Skel.so" in str(err.value) and "libQnnHtpV75Skel.so" in str(err.value)


def test_sdk_from_environment(tmp_path, sdk):
    b = resolve_runtime(_bare(tmp_path), "v75", env={"QNN_SDK_ROOT": str(sdk)})
    assert "libQnnHtpV75Skel.so" in {f.rel for f in b.files}


def test_no_runner(tmp_path):
    (tmp_path / "libMNN.so").write_bytes(b"x")
    with pytest.raises(ArtifactError, match="no runner binary"):
        resolve_runtime(tmp_path, "v79")


def test_two_runtimes_share_qnn_blobs(tmp_path, sdk, cache):
    t = CountingTransport(local_device(tmp_path / "device"))
    mnn = provision_runtime(t, _bare(tmp_path), qnn_sdk=sdk, cache=cache, progress=Q)
    assert mnn.runner == f"{mnn.remote_dir}/llm_demo" and mnn.htp_arch == "v79"
    assert mnn.env()["LD_LIBRARY_PATH"] == mnn.remote_dir
    assert mnn.env()["ADSP_LIBRARY_PATH"].split(";")[0] == mnn.remote_dir
    t.reset_counts()
    et = provision_runtime(t, _bare(tmp_path, "executorch"), qnn_sdk=sdk, cache=cache, progress=Q)
    shared = {"libQnnHtp.so", "libQnnSystem.so", "libQnnHtpV79Stub.so", "libQnnHtpV79Skel.so"}
    assert not shared & set(t.pushed_files)  # already on the device as blobs
    for lib in shared:
        assert (Path(mnn.remote_dir) / lib).stat().st_ino == (Path(et.remote_dir) / lib).stat().st_ino
    t.reset_counts()
    again = provision_runtime(t, _bare(tmp_path), qnn_sdk=sdk, cache=cache, progress=Q)
    assert again.bytes_sent == 0 and t.shells == 0  # manifest and stats over the file protocol


# ---- CPU-only runtimes and build trees --------------------------------------------------------

def test_cpu_only_bundle_needs_no_qnn_library(tmp_path):
    b = resolve_runtime(_bare(tmp_path), "v79", need_qnn=False, env={})
    # The virtual build puts MNN's llm_logits_diff beside llm_demo, as MNN's own build does.
    assert {f.rel for f in b.files} == {"llm_demo", "llm_logits_diff", "libMNN.so"}
    assert not b.qnn and b.htp_arch == ""


def test_cpu_only_bundle_on_the_host_ignores_qnn_libraries(tmp_path):
    from virtual_lab.runtime import make_runtime_dir

    rt = make_runtime_dir(tmp_path / "rt", "v79")  # carries the v79 QNN libraries
    b = resolve_runtime(rt, None, need_qnn=False, env={})
    assert not any(f.rel.startswith("libQnn") for f in b.files) and not b.qnn
    with pytest.raises(ArtifactError, match="soc: host"):
        resolve_runtime(rt, None, need_qnn=True, env={})


def test_qnn_libraries_found_are_taken_without_being_required(tmp_path, sdk):
    b = resolve_runtime(_bare(tmp_path), "v79", qnn_sdk=sdk, need_qnn=False)
    assert b.qnn and b.htp_arch == "v79" and "libQnnHtpV79Skel.so" in {f.rel for f in b.files}


def test_a_partial_set_of_qnn_libraries_is_no_qnn_runtime(tmp_path, sdk):
    rt = _bare(tmp_path)
    (rt / "libQnnHtp.so").write_bytes((sdk / "lib/aarch64-android/libQnnHtp.so").read_bytes())
    b = resolve_runtime(rt, "v79", need_qnn=False, env={})
    assert not b.qnn and "libQnnHtp.so" not in {f.rel for f in b.files}


def test_script_runner_folder_never_pushes_build_system_files(tmp_path):
    rt = _bare(tmp_path)
    for name in ("CMakeCache.txt", "Makefile", "cmake_install.cmake", "libfoo.a", "main.o"):
        (rt / name).write_text("x")
    (rt / "CMakeFiles").mkdir()
    (rt / "CMakeFiles" / "llm_demo").write_text("not the runner")
    names = {f.rel for f in resolve_runtime(rt, "v79", need_qnn=False, env={}).files}
    assert names == {"llm_demo", "llm_logits_diff", "libMNN.so"}


def test_runner_found_in_a_subfolder_of_a_build_tree(tmp_path):
    rt = _bare(tmp_path)
    tree = tmp_path / "build"
    (tree / "bin").mkdir(parents=True)
    (tree / "bin" / "llm_demo").write_bytes((rt / "llm_demo").read_bytes())
    b = resolve_runtime(tree, "v79", need_qnn=False, env={})
    assert b.runner == "llm_demo" and {f.rel for f in b.files} == {"llm_demo"}


def test_the_error_names_the_front_doors_option(tmp_path):
    with pytest.raises(ArtifactError) as err:
        resolve_runtime(_bare(tmp_path), "v79", env={}, qnn_sdk_option="harness push --qnn-sdk")
    assert "harness push --qnn-sdk" in str(err.value)


def test_elf_reader_on_a_real_binary_and_a_damaged_one(tmp_path):
    import sys

    from harness.provision import is_elf, read_elf

    exe = Path(sys.executable).resolve()
    if not is_elf(exe):
        pytest.skip(f"{exe} is not an ELF file")
    info = read_elf(exe)
    assert info.interpreter and not info.is_android and info.elf_class in (32, 64)
    bad = tmp_path / "libbroken.so"
    bad.write_bytes(b"\x7fELF" + b"\x00" * 8)
    with pytest.raises(ArtifactError, match="libbroken.so"):
        read_elf(bad)
