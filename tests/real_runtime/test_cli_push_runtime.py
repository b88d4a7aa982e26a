"""`harness push --runtime DIR [--qnn-sdk SDK]` and `harness status` on the virtual lab: the same
validation and incremental push as a model; an unchanged re-push sends nothing."""

from __future__ import annotations

from pathlib import Path

from tests.cli.clikit import harness
from tests.real_runtime.realrt import RUNTIME_FILES, make_build_tree, real_runtime_or_skip


def test_push_real_build_tree_then_unchanged_repush_sends_nothing(vlab_factory, tmp_path: Path) -> None:
    real_runtime_or_skip()
    vlab = vlab_factory()
    tree = make_build_tree(tmp_path / "build")
    first = harness("--file", str(vlab.devices_yaml), "push", "--device", "oneplus13", "--runtime", str(tree))
    assert first.returncode == 0, first.stderr
    assert f": {len(RUNTIME_FILES)} files," in first.stdout and "CPU only" in first.stdout and "harness push --qnn-sdk" in first.stdout
    again = harness("--file", str(vlab.devices_yaml), "push", "--device", "oneplus13", "--runtime", str(tree))
    assert again.returncode == 0 and ": 0 files, 0 bytes sent" in again.stdout, again.stdout + again.stderr
    status = harness("--file", str(vlab.devices_yaml), "status", "--device", "oneplus13")
    assert status.returncode == 0, status.stderr
    line = next(ln for ln in status.stdout.splitlines() if "llm_demo-cpu" in ln)
    assert line.split()[0] == "runtime" and f"{len(RUNTIME_FILES)} files" in line and "llm_demo cpu-only" in line
    # Nothing but the runner and the libraries it needs went to the device.
    device = vlab.adb_device("oneplus13")
    pushed = sorted(p.name for p in Path(device.host_path("/data/local/tmp/harness/runtimes/llm_demo-cpu")).iterdir())
    assert pushed == sorted(RUNTIME_FILES)


def test_push_runtime_with_qnn_sdk_and_its_errors(vlab_factory, tmp_path: Path) -> None:
    from virtual_lab.runtime import make_runtime_dir

    vlab = vlab_factory()
    bare = make_runtime_dir(tmp_path / "rt", "v79", with_qnn_libs=False)
    ok = harness("--file", str(vlab.devices_yaml), "push", "--device", "oneplus13", "--runtime", str(bare),
                 "--qnn-sdk", str(vlab.qnn_sdk_dir))
    assert ok.returncode == 0 and "QNN v79" in ok.stdout, ok.stdout + ok.stderr
    again = harness("--file", str(vlab.devices_yaml), "push", "--device", "oneplus13", "--runtime", str(bare),
                    "--qnn-sdk", str(vlab.qnn_sdk_dir))
    assert ": 0 files, 0 bytes sent" in again.stdout, again.stdout
    status = harness("--file", str(vlab.devices_yaml), "status", "--device", "oneplus13")
    assert "llm_demo-v79" in status.stdout and "llm_demo v79" in status.stdout, status.stdout
    # An SDK without the v79 libraries: the error names what is missing and the option to pass, once.
    empty = tmp_path / "empty-sdk"
    empty.mkdir()
    bad = harness("--file", str(vlab.devices_yaml), "push", "--device", "oneplus13", "--runtime", str(bare),
                  "--qnn-sdk", str(empty))
    assert bad.returncode == 1 and "Traceback" not in bad.stderr  # the push was refused (exitcodes.py)
    assert "libQnnHtpV79Skel.so" in bad.stderr and "harness push --qnn-sdk" in bad.stderr
    assert bad.stderr.count("is missing") == 1
    nothing = harness("--file", str(vlab.devices_yaml), "push", "--device", "oneplus13")
    assert nothing.returncode == 4 and "--runtime" in nothing.stderr  # a usage error
