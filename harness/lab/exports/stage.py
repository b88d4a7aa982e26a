"""The night's first stage: every export of the plan, on the lab host, before any device is
claimed (docs/exports.md). Up to `exports.parallel` exports run at once; each is one testcase
(`test_export[tiny-decoder-sa8295-16a4w]`) written as soon as it is decided. The exports that built are laid
out for the suites as `<out>/exports/<model>/<SOC>/<format>` (a link to the cache entry) with
`exports.json` beside them saying what failed and why; the plan's exported models point there.
A stop (Ctrl-C, SIGTERM) ends every export's process group and keeps nothing partial."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.checks import REFERENCE_DIR
from harness.checks.localize import DEBUG_FOLDER
from harness.evidence import CacheUse
from harness.hostfiles import write_atomic
from harness.inventory import DeviceSpec
from harness.lab.exports.build import Builder
from harness.lab.exports.cache import ExportCache, default_cache_root, export_key, inputs_digest, key_material
from harness.lab.exports.results import ExportResult, export_record
from harness.lab.exports.tools import HostTools
from harness.lab.plan import ExportJob, ExportsSpec, ModelSpec, Plan, default_parallel
from harness.provision import HashCache, default_cache_path
from harness.report import TestRecord

STATUS_FILE = "exports.json"
# The harness's float-reference builder: its source is part of a reference's cache key.
REFERENCE_SOURCE = Path(__file__).resolve().parents[2] / "etllama" / "reference.py"
SayFn = Callable[[str], None]


@dataclass
class ExportStage:
    """What the stage decided: one result per export, the records, where the night's exports are."""

    spec: ExportsSpec
    root: Path  # <out>/exports
    results: list[ExportResult] = field(default_factory=list)
    records: list[TestRecord] = field(default_factory=list)
    wall_s: float = 0.0
    interrupted: bool = False

    def plan_for(self, plan: Plan) -> Plan:
        """The plan with its exported models' folders in this night's layout."""
        made = {n: ModelSpec(n, path, kind) for n, (path, kind) in self.spec.model_folders(self.root).items()}
        return replace(plan, models={**plan.models, **made})

    def of(self, model: str, soc_model: str, *, debug: bool = False) -> list[ExportResult]:
        """The model's exports for a SoC: the programs, or (`debug`) their debug builds."""
        return [r for r in self.results
                if r.job.build.model == model and r.job.target.soc == soc_model and r.job.debug == debug
                and not r.job.reference]

    def failed(self) -> list[ExportResult]:
        return [r for r in self.results if not r.ok]


def lab_socs(devices: Sequence[DeviceSpec]) -> tuple[str, ...]:
    """`targets: lab`: the SoCs of the plan's devices that have an HTP, once each."""
    return tuple(dict.fromkeys(d.soc_model for d in devices if d.has_htp))


def export_status(folder: Path) -> dict[str, dict[str, Any]]:
    """`exports.json` of one model's SoC folder: format -> {status, reason, testcase} ({} when
    the folder was not made by the export stage). The suites read why a format is missing here."""
    try:
        data = json.loads((folder / STATUS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def soc_folder(root: Path, job: ExportJob) -> Path:
    """Where a job's format link goes: `<model>/<SOC>/`, a debug build's in its `debug/` (the
    localize check looks there: harness.checks.localize.layout.debug_build_places)."""
    folder = root / job.build.model / job.target.soc
    return folder / DEBUG_FOLDER if job.debug else folder


def _link(folder: Path, name: str, target: Path | None) -> None:
    """`folder/name` -> `target` (replaced atomically), or a stale link removed when there is none."""
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / name
    if target is not None:
        tmp = folder / f".{name}.{os.getpid()}.link"
        if tmp.is_symlink():
            tmp.unlink()
        os.symlink(target, tmp)
        os.replace(tmp, link)
    elif link.is_symlink():
        link.unlink()


def _lay_out(root: Path, results: list[ExportResult]) -> None:
    """Per (model, SoC), and per its debug builds: a link per built format (replaced atomically, a
    stale one removed) and exports.json; a build's float reference (`reference:`) linked as
    `<model>/<SOC>/reference/`, beside the format folders, where the float-reference check looks."""
    groups: dict[Path, list[ExportResult]] = {}
    references = {r.job.build.model: r for r in results if r.job.reference}
    for r in results:
        if not r.job.reference:
            groups.setdefault(soc_folder(root, r.job), []).append(r)
    for folder, rs in groups.items():
        ref = references.get(rs[0].job.build.model)
        if ref is not None and not rs[0].job.debug:
            _link(folder, REFERENCE_DIR, ref.folder / REFERENCE_DIR if ref.ok and ref.folder is not None else None)
    for folder, rs in groups.items():
        folder.mkdir(parents=True, exist_ok=True)
        for r in rs:
            _link(folder, r.job.format, r.folder if r.ok else None)
        status = {r.job.format: {"status": r.status.value, "testcase": r.job.testcase, "cache": r.cache.value,
                                 "reason": "" if r.ok else r.reason()} for r in rs}
        write_atomic(folder / STATUS_FILE, json.dumps(status, indent=1, sort_keys=True))


def _line(r: ExportResult) -> str:
    what = {CacheUse.HIT: "cache hit"}.get(r.cache, f"built in {r.duration_s:.1f} s")
    if r.ok:
        return f"export {r.job.build.model} {r.job.id}: passed ({what})"
    if r.failure is None:
        return f"export {r.job.build.model} {r.job.id}: interrupted ({r.note or 'stopped'})"
    cached = " (cached: the same inputs failed before; --rebuild-exports retries)" if r.cache is CacheUse.HIT else ""
    return f"export {r.job.build.model} {r.job.id}: FAILED {r.failure.failure_class}: {r.failure.message}{cached}"


def run_export_stage(spec: ExportsSpec, devices: Sequence[DeviceSpec], out_dir: Path, *, stop: threading.Event,
                     say: SayFn, run_id: str, write: Callable[[TestRecord], None] | None = None,
                     rebuild: bool = False, only_target: str | None = None, only_format: str | None = None,
                     cache_root: Path | None = None, environ: Mapping[str, str] = os.environ) -> ExportStage:
    """Run every export of `spec` (those of `only_target` / `only_format` when given)."""
    started = time.monotonic()
    stage = ExportStage(spec, out_dir / "exports")
    jobs = spec.jobs(lab_socs(devices), only_target=only_target, only_format=only_format)
    hashes = HashCache(default_cache_path())
    cache = ExportCache(cache_root or default_cache_root(), hashes)
    cache.sweep_tmp()
    tools = HostTools.find()
    digests = {b.model: inputs_digest(b.inputs, hashes) for b in spec.builds}
    ref_digests = {b.model: inputs_digest((*b.reference.files, REFERENCE_SOURCE), hashes)
                   for b in spec.builds if b.reference is not None}
    keys = {j: export_key(key_material(j, (ref_digests if j.reference else digests)[j.build.model], tools.versions))
            for j in jobs}
    cache.leases.hold(keys.values())  # held until this process ends: no other run evicts them meanwhile
    parallel = spec.parallel or default_parallel()
    say(f"exports: {len(jobs)} to build ({', '.join(j.testcase for j in jobs)}), {parallel} at once, "
        f"cache {cache.root}")
    builder = Builder(cache, tools, stop, environ, stage.root / "logs", rebuild=rebuild)
    lock = threading.Lock()

    def one(job: ExportJob) -> ExportResult:
        result = builder.run(job, keys[job])
        rec = export_record(result, run_id)
        with lock:
            stage.results.append(result)
            stage.records.append(rec)
            if write is not None:
                write(rec)
        say(_line(result))
        return result

    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="export") as pool:
        list(pool.map(one, jobs))
    order = {j: i for i, j in enumerate(jobs)}
    stage.results.sort(key=lambda r: order[r.job])
    stage.interrupted = stop.is_set()
    _lay_out(stage.root, stage.results)
    hashes.save()
    if not stage.interrupted:
        evicted, skipped = cache.evict(spec.cache_max_bytes, keep=set(keys.values()))
        for why in skipped:
            say(f"exports: cache entry {why}")
        if evicted:
            say(f"exports: cache over {spec.cache_max_bytes >> 20} MB: {len(evicted)} least recently used removed")
    stage.wall_s = time.monotonic() - started
    hits = sum(r.cache is CacheUse.HIT for r in stage.results)
    built = sum(r.ok and r.cache.built_now for r in stage.results)  # a cache hit built nothing tonight
    said = [f"{built} built", f"{hits} from the cache" if hits else "", f"{len(stage.failed())} failed" if stage.failed() else ""]
    say(f"exports: done in {stage.wall_s:.2f} s: {', '.join(s for s in said if s)}")
    return stage
