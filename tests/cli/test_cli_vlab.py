"""The command line against a running virtual lab, as a user drives it: `python -m virtual_lab up`,
`harness push`, `harness status`, `harness lab run` and `harness lab status`."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from harness.inventory import load_inventory
from tests.cli.clikit import REPO, harness


def test_virtual_lab_up_writes_a_working_inventory(tmp_path: Path) -> None:
    out = tmp_path / "devices.yaml"
    proc = subprocess.Popen([sys.executable, "-m", "virtual_lab", "up", "--root", str(tmp_path / "lab"),
                             "--devices-yaml", str(out)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not out.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert out.exists(), "virtual_lab up wrote no devices.yaml"
        inv = load_inventory(out)
        assert set(inv.devices) == {"oneplus13", "sm8650-qrd", "sa8295-car"}
        listed = harness("devices", "--file", str(out))
        assert listed.returncode == 0 and "127.0.0.1:" in listed.stdout
        from harness.transport import open_transport

        for name in ("oneplus13", "sa8295-car"):
            with open_transport(inv.get(name)) as t:
                assert t.shell(["getprop", "ro.soc.model"] if name == "oneplus13" else ["uname", "-s"]).ok
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0


def test_push_and_status_commands(vlab_factory, tmp_path: Path) -> None:
    from virtual_lab.exports import make_qwen3_export

    vlab = vlab_factory()  # its own devices: what this test pushes must not be on the shared lab's

    export = make_qwen3_export(tmp_path / "qwen3-cli", size_mb=1).path
    first = harness("--file", str(vlab.devices_yaml), "push", "--device", "oneplus13", str(export))
    assert first.returncode == 0, first.stderr
    assert "files" in first.stdout and "bytes sent" in first.stdout
    again = harness("--file", str(vlab.devices_yaml), "push", "--device", "oneplus13", str(export))
    assert again.returncode == 0 and ": 0 files, 0 bytes sent" in again.stdout, again.stdout
    status = harness("--file", str(vlab.devices_yaml), "status", "--device", "oneplus13")
    assert status.returncode == 0 and "qwen3-cli" in status.stdout, status.stdout
    # A v79 export refused on the v75 board, before any byte moves, with a clear message.
    refused = harness("--file", str(vlab.devices_yaml), "push", "--device", "sm8650-qrd", str(export))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr  # the push's own work failed
    assert "sm8650-qrd" in refused.stderr and "v79" in refused.stderr and "v75" in refused.stderr


def test_lab_run_and_status_commands(vlab_factory, tmp_path: Path) -> None:
    from virtual_lab.exports import make_qwen3_export

    vlab = vlab_factory()

    make_qwen3_export(tmp_path / "exports" / "v79", size_mb=1)
    plan = tmp_path / "nightly.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "cli-night", "devices": ["oneplus13"],
        "models": {"qwen3": {"path": str(tmp_path / "exports" / "{htp_arch}")}},
        "suites": [{"name": "matrix", "runner": "llm_demo", "models": ["qwen3"]}],
        "options": {"runtime_dir": str(vlab.runtime_dir("v79")), "qnn_sdk": str(vlab.qnn_sdk_dir),
                    "max_new_tokens": 16, "timeout_s": 120},
        "health": {"min_free_mb": 16},
    }))
    locks = tmp_path / "locks"
    run = harness("--file", str(vlab.devices_yaml), "lab", "run", "--plan", str(plan), "--out", str(tmp_path / "out"),
                  "--lock-dir", str(locks))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "oneplus13" in run.stdout and "completed" in run.stdout
    assert (tmp_path / "out").is_dir() and list((tmp_path / "out").rglob("*.xml"))
    status = harness("--file", str(vlab.devices_yaml), "lab", "status", "--lock-dir", str(locks))
    assert status.returncode == 0 and "oneplus13" in status.stdout, status.stdout
    bad = harness("--file", str(vlab.devices_yaml), "lab", "run", "--plan", str(tmp_path / "absent.yaml"))
    assert bad.returncode == 4 and "absent.yaml" in bad.stderr and "Traceback" not in bad.stderr  # plan error
