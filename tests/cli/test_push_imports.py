"""What `harness push` imports (issue 28): only what the command needs. The push runs in a new
process against the virtual lab's adb (a real adb server, an emulated device), as a user runs
it, and that process reports every module it loaded once the push is done."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.clikit import REPO

# Runs harness.cli's main as `python -m harness.cli` would, then lists sys.modules.
_PUSH_AND_LIST = """
import json, sys
from harness.cli import main
code = main(sys.argv[1:])
print("@@modules " + json.dumps(sorted(sys.modules)))
sys.exit(code)
"""

# Packages a push never needs: the virtual lab, report rendering, plotting, the lab driver,
# the checks, the runners, the runtime resolver (pyelftools), the ssh driver (paramiko).
NEVER = ("virtual_lab", "jinja2", "matplotlib", "labgrid", "harness.checks", "harness.report", "harness.runners",
         "harness.provision.runtime", "elftools", "paramiko", "harness.transport.ssh")
# Imported only where there is work for it: retries after a transport fault (none here). (The
# export's context binaries are read through harness.qnn.compiled_io, which brings concurrent.futures.)
ONLY_WHEN_NEEDED = ("tenacity",)


def _push(devices_yaml: Path, export: Path, cache_dir: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    proc = subprocess.run([sys.executable, "-c", _PUSH_AND_LIST, "--file", str(devices_yaml), "push", "--device",
                           "oneplus13", str(export)], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CI": "true", "HARNESS_CACHE_DIR": str(cache_dir)})
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("@@modules ")), None)
    assert line is not None, proc.stdout + proc.stderr
    return proc, set(json.loads(line[len("@@modules "):]))


def _loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_a_push_imports_only_what_it_needs(vlab_factory, tmp_path: Path) -> None:
    from virtual_lab.exports import make_qwen3_export
    from virtual_lab.lab import LabDeviceConfig

    lab = vlab_factory([LabDeviceConfig("oneplus13")])  # its own device: nothing of this export on it yet
    export = make_qwen3_export(tmp_path / "qwen3-imports", size_mb=2).path
    for what, expect in (("first push", "bytes sent"), ("unchanged", ": 0 files, 0 bytes sent")):
        proc, modules = _push(lab.devices_yaml, export, tmp_path / "cache")
        assert proc.returncode == 0 and expect in proc.stdout, (what, proc.stdout, proc.stderr)
        # The push really ran its code path in that process.
        assert {"harness.provision.sync", "harness.transport.adb.transport", "harness.inventory"} <= modules, what
        assert _loaded(modules, NEVER) == [], what
        if "transport fault during" not in proc.stderr:  # a retried fault needs tenacity, rightly
            assert _loaded(modules, ONLY_WHEN_NEEDED) == [], what
