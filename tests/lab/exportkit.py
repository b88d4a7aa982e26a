"""Helpers for the export stage's tests: a plan whose exports run tests/lab/fake_exporter.py,
an inventory of local devices with an HTP SoC, the stage run with its own cache folder."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import yaml

from virtual_lab.exports.executorch import real_program

FAKE = Path(__file__).with_name("fake_exporter.py")
FAKE_ARGV = [sys.executable, str(FAKE), "--soc", "{soc}", "--soc-id", "{soc_id}", "--arch", "{dsp_arch}",
             "--format", "{format}", "--out", "{out}"]


def write_exports_plan(folder: Path, *, builds: list[dict[str, Any]] | None = None, suites: list | None = None,
                       **exports: Any) -> Path:
    (folder / "recipe.txt").exists() or (folder / "recipe.txt").write_text("recipe 1\n")
    build = {"model": "tiny", "command": FAKE_ARGV, "targets": ["SM8650", "SA8295"], "formats": ["16a4w", "8a8w"],
             "inputs": ["recipe.txt"], "timeout_s": 60}
    data = {"name": "export-night", "exports": {"builds": builds or [build], **exports},
            "suites": suites or [{"name": "executorch_qnn", "models": ["tiny"]}],
            "options": {"runtime_dir": str(folder)}}
    path = folder / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def write_soc_inventory(folder: Path, socs: tuple[str, ...] = ("SM8650", "SA8295")) -> Path:
    """Local devices of these SoCs: emulated HTPs (`htp: emulator`) where the inventory knows them."""
    import harness.inventory

    emulator = getattr(harness.inventory, "HTP_EMULATOR", None)
    devices = [{"name": f"emu-{s.lower()}", "transport": "local", "soc": s, "work_dir": str(folder / f"dev-{s}"),
                **({"htp": emulator} if emulator else {})} for s in socs]
    path = folder / "devices.yaml"
    path.write_text(yaml.safe_dump({"devices": devices}))
    return path


def fake_env(folder: Path, modes: str = "", **extra: str) -> dict[str, str]:
    # The exporter writes the virtual lab's real programs: lowered here (once per session, into
    # the session's cache) so a build's own time and timeout never include the lowering.
    real_program(57)
    env = dict(os.environ, FAKE_EXPORT_COUNTER=str(folder / "counter.txt"), FAKE_EXPORT_MODES=modes)
    env.update(extra)
    return env


def runs(folder: Path) -> list[str]:
    path = folder / "counter.txt"
    return path.read_text().split() if path.exists() else []


def run_stage(plan, folder: Path, *, env: dict[str, str], stop: threading.Event | None = None, out: str = "out",
              hold: bool = False, **kw: Any):
    """The stage as one night runs it; its leases released after it (a night that ended) unless `hold`."""
    from harness.lab.exports import Leases, run_export_stage

    said: list[str] = []
    stage = run_export_stage(plan.exports, [], folder / out, stop=stop or threading.Event(), say=said.append,
                             run_id="r1", cache_root=folder / "cache", environ=env, **kw)
    if not hold:
        Leases(folder / "cache" / "leases").release(r.key for r in stage.results)
    return stage, said
