"""A failed cell's repro bundle (docs/bisect.md#repro-bundles): what ran, what came back, the verdict.

`<out>/bundles/<device>/<testcase>/bundle.json` holds the device's facts, the runtime's QAIRT
build, every pushed file (its set, path on the host and on the device, size, sha256), the exact
command and environment on the device, the plan entry as a cell (harness/replay/cell.py), the
harness's version, the record (logs, runner output) and the verdict. Small by default: the pushed
files are named by hash, not copied; `copy_files` copies them into the bundle's `files/`. Files
the record points at on the host (ETDump, localization files) are copied into `artifacts/`."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness import __version__
from harness.hostfiles import write_atomic
from harness.inventory import DeviceSpec
from harness.lab.plan import Plan
from harness.provision import read_local_manifest, sha256_file
from harness.replay.cell import Cell, cell_of
from harness.report import TestRecord

BUNDLE_FILE = "bundle.json"
FORMAT = "harness-bundle/1"
BUNDLES_DIR = "bundles"


@dataclass(frozen=True)
class PushedFile:
    set: str  # model | runtime
    rel: str
    host: str  # "" when the host file could not be found
    device: str
    sha256: str
    size: int

    def to_json(self) -> dict[str, object]:
        return {"set": self.set, "rel": self.rel, "host": self.host, "device": self.device, "sha256": self.sha256,
                "size": self.size}


def _walk(root: Path) -> Iterator[tuple[str, Path]]:
    for folder, dirs, files in os.walk(root, followlinks=True):
        dirs.sort()
        for name in sorted(files):
            full = Path(folder) / name
            if full.is_file():
                yield full.relative_to(root).as_posix(), full


def _runtime_files(cell: Cell, device: DeviceSpec) -> tuple[list[PushedFile], str | None]:
    """The runtime's files as provisioning picks them (the runner, the libraries it needs, the QNN
    libraries for the device's arch: harness/provision/runtime.py) and its QAIRT build."""
    from harness.errors import HarnessError
    from harness.provision import default_runtime_name, resolve_runtime

    if not cell.options.get("runtime_dir"):
        return [], None
    sdk = cell.options.get("qnn_sdk")
    try:
        rt = resolve_runtime(Path(str(cell.options["runtime_dir"])), device.htp_arch or None,
                             qnn_sdk=str(sdk) if sdk else None, need_qnn=bool(sdk) and device.has_htp)
    except HarnessError:
        return [], None  # the folder changed since the night: replay names what no longer matches
    remote = f"{device.work_dir}/runtimes/{default_runtime_name(rt.runner, rt.htp_arch)}"
    return [PushedFile("runtime", f.rel, str(f.path), f"{remote}/{f.rel}", sha256_file(f.path), f.size)
            for f in rt.files], rt.qairt_build


def pushed_files(cell: Cell, device: DeviceSpec) -> tuple[list[PushedFile], str | None]:
    """The model's files as provisioning last recorded them (the host's manifest,
    harness/provision/manifest.py; else as the folder holds them now), the runtime's as
    provisioning picks them, and the runtime's QAIRT build."""
    out: list[PushedFile] = []
    model = read_local_manifest(cell.model_path)
    if model is not None:
        out += [PushedFile("model", rel, str(cell.model_path / rel), f"{model.remote_dir}/{rel}", f.sha256, f.size)
                for rel, f in sorted(model.files.items())]
    elif cell.model_path.is_dir():
        out += [PushedFile("model", rel, str(p), "", sha256_file(p), p.stat().st_size) for rel, p in _walk(cell.model_path)]
    runtime, qairt = _runtime_files(cell, device)
    return out + runtime, qairt


def _host_files(value: object, under: Path) -> Iterator[Path]:
    """Host files a record's extras name under the night's folder (ETDump, localization files)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _host_files(v, under)
    elif isinstance(value, list):
        for v in value:
            yield from _host_files(v, under)
    elif isinstance(value, str) and value.startswith(str(under)) and len(value) < 4096:
        path = Path(value)
        if path.is_file():
            yield path


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_")[:120] or "cell"


def write_bundle(rec: TestRecord, plan: Plan, device: DeviceSpec, out_dir: Path, *, copy_files: bool = False) -> Path:
    """The bundle of one failed record; returns its folder."""
    entry = next(e for e in plan.entries() if e.id == rec.plan_entry)
    cell = cell_of(plan, entry, device, rec.name)
    folder = out_dir / BUNDLES_DIR / device.name / slug(rec.name)
    folder.mkdir(parents=True, exist_ok=True)
    files, qairt = pushed_files(cell, device)
    data = rec.to_dict()
    artifacts = []
    for path in dict.fromkeys(_host_files(data.get("extras"), out_dir)):
        dst = folder / "artifacts" / slug(str(path.relative_to(out_dir)))
        dst.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, dst)
        artifacts.append({"from": str(path), "file": str(dst.relative_to(folder)), "sha256": sha256_file(dst)})
    if copy_files:
        for f in files:
            if f.host:
                dst = folder / "files" / f.set / f.rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f.host, dst)
    prov = data.get("extras", {}).get("provenance") or {}
    bundle = {
        "format": FORMAT, "harness_version": __version__, "written_at": time.time(), "run_id": rec.run_id,
        "plan": str(plan.path), "plan_entry": rec.plan_entry, "cell": cell.to_json(),
        "device": {"name": device.name, "soc_model": device.soc_model, "soc_id": device.soc_id if device.has_htp else None,
                   "htp_arch": device.htp_arch, "transport": str(device.transport), "tier": prov.get("tier")},
        "runtime": {"qairt_build": prov.get("qairt") or qairt, "program_sha256": prov.get("program_sha256"),
                    "binaries_sha256": prov.get("binaries_sha256") or []},
        "files": [f.to_json() for f in files], "files_copied": copy_files,
        "device_command": data.get("extras", {}).get("device_command"),
        "verdict": {"status": rec.status.value, "failure_class": rec.failure_class.value if rec.failure_class else "",
                    "signature": rec.signature, "message": rec.message},
        "record": data, "artifacts": artifacts,
    }
    write_atomic(folder / BUNDLE_FILE, json.dumps(bundle, indent=1, sort_keys=True))
    return folder


def write_bundles(records: Iterable[TestRecord], plan: Plan, devices: dict[str, DeviceSpec], out_dir: Path, *,
                  copy_files: bool = False) -> list[Path]:
    """A bundle for every failed cell of the night (a record of a device, from a plan entry)."""
    made = []
    for rec in records:
        if rec.is_bad and rec.device in devices and rec.plan_entry and "::" not in rec.name:
            if any(e.id == rec.plan_entry for e in plan.entries()):
                made.append(write_bundle(rec, plan, devices[rec.device], out_dir, copy_files=copy_files))
    return made
