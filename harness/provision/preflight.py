"""Load preflight: will this export's context binaries load on that device's QNN runtime? Decided
before a byte moves, by the rule measured on real QNN (docs/qnn-compat.md): a context binary loads
iff the QAIRT that built it (the build id in its header, read by the host's libQnnSystem.so) is not
newer than the runtime's, and only on the SoC it was compiled for. The runtime's QAIRT is the one
that is or will be on the device: the runtime folder being pushed (its libQnnHtp.so), else what the
device's runtime manifests recorded when it was pushed, else, on an emulated HTP, the host's QAIRT.
Each refusal names its axis, both sides and the fix in the exporter's own terms."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from harness.errors import ArtifactError, ProvisionError
from harness.inventory import DeviceSpec
from harness.provision.artifact_types import ModelArtifact
from harness.provision.manifest import Manifest
from harness.transport import Transport


class LoadAxis(StrEnum):
    """Why a context binary will not load."""

    TARGET = "soc-arch"  # compiled for another SoC / HTP arch
    QAIRT_TOO_NEW = "qairt-too-new"  # built by a newer QAIRT than the runtime's
    CORRUPT = "corrupt"  # QNN's reader refuses it, or the program is cut short
    MISSING = "missing"  # a binary the export names is not there


class PreflightError(ArtifactError):
    """A load the preflight refused; `axis` says which rule (the message says it for a person)."""

    def __init__(self, message: str, axis: LoadAxis) -> None:
        super().__init__(message)
        self.axis = axis


@dataclass(frozen=True)
class RuntimeQairt:
    """The QAIRT build a device's QNN runtime is (or will be) and how that was learnt."""

    build: str  # "v2.49.40.260810104044"
    where: str  # "the runtime pushed to the device", "the host's QAIRT (HTP emulator, ...)"
    update: str  # how to give the device a newer QAIRT


PUSHED_UPDATE = "push QAIRT {made} or newer libraries with the runtime (harness push --runtime DIR --qnn-sdk SDK)"
EMULATOR_UPDATE = ("give the emulator QAIRT {made} or newer (--qnn-sdk / $QNN_SDK_ROOT, or the onnxruntime-qnn "
                   "wheel that carries it)")


def pushed_runtime(build: str | None, where: str = "the runtime pushed to the device") -> RuntimeQairt | None:
    return RuntimeQairt(build, where, PUSHED_UPDATE) if build else None


def runner_qairt(device: DeviceSpec, build: str | None) -> RuntimeQairt | None:
    """The QAIRT of a runtime the caller holds: on an emulated HTP the host's, else the pushed one's."""
    if device.emulated:
        return RuntimeQairt(build, "the host's QAIRT, the HTP emulator", EMULATOR_UPDATE) if build else None
    return pushed_runtime(build)


def emulator_qairt(qnn_sdk: str | None = None) -> RuntimeQairt | None:
    """The host's QAIRT, which an emulated HTP device runs on; None when the host has none."""
    from harness.qnn import auto_host_qnn

    host, _why = auto_host_qnn(qnn_sdk)
    if host is None:
        return None
    return RuntimeQairt(host.qairt_build, f"the host's QAIRT, the HTP emulator ({host.source})", EMULATOR_UPDATE)


def manifest_qairt(transport: Transport) -> RuntimeQairt | None:
    """The newest QAIRT among the QNN runtimes the device's manifests record (harness push wrote
    `qairt_build` into them); None when none records one. The newest: if even it is too old, no
    runtime on the device loads the binary. The manifests' paths are remembered for the next
    provision to read in its first round trip (loadcheck.py)."""
    from harness.provision.scripts import RUNTIME_MANIFESTS_SCRIPT, parse_manifest_lines, script_argv

    device = transport.device
    res = transport.shell(script_argv(RUNTIME_MANIFESTS_SCRIPT, [device.work_dir]))
    found = parse_manifest_lines(res.stdout.splitlines(), device.name)
    remember_runtime_manifests(device, [path for path, _m in found])
    return newest_qairt(found, device)


RUNTIMES_MEMO = "qnn-runtime-manifests.json"  # in user_cache_dir(): {"device|work_dir": [manifest paths]}


def _memo_key(device: DeviceSpec) -> str:
    return f"{device.name}|{device.work_dir}"


def _read_memo() -> dict[str, Any]:
    from harness.hostfiles import user_cache_dir

    try:
        memo = json.loads((user_cache_dir() / RUNTIMES_MEMO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return memo if isinstance(memo, dict) else {}  # a damaged memo costs one device listing, nothing else


def remembered_runtime_manifests(device: DeviceSpec) -> list[str] | None:
    """Where the device's runtime manifests were when last listed from this host (and where this
    host pushed one since); None: never listed from here."""
    paths = _read_memo().get(_memo_key(device))
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else None


def remember_runtime_manifests(device: DeviceSpec, paths: list[str], *, add: bool = False) -> None:
    """Record the listing (`add`: one more manifest, a runtime this host just pushed)."""
    from harness.errors import HostWriteError
    from harness.hostfiles import user_cache_dir, write_atomic

    memo = _read_memo()
    known = memo.get(_memo_key(device))
    if add:
        if not isinstance(known, list):
            return  # never listed: the next provision lists the device anyway
        paths = sorted({*(p for p in known if isinstance(p, str)), *paths})
    if known == paths:
        return
    memo[_memo_key(device)] = paths
    try:
        user_cache_dir().mkdir(parents=True, exist_ok=True)
        write_atomic(user_cache_dir() / RUNTIMES_MEMO, json.dumps(memo, indent=1))
    except (OSError, HostWriteError):
        pass  # only a shortcut: the next provision lists the device again


def newest_qairt(found: list[tuple[str, Manifest | ProvisionError]], device: DeviceSpec) -> RuntimeQairt | None:
    """The newest QAIRT the runtime manifests `found` record (None: none records one)."""
    from harness.qnn import qairt_tuple

    known: list[tuple[tuple[int, int, int], str, str]] = []
    for _path, m in found:
        if isinstance(m, ProvisionError):  # a damaged manifest says nothing; `harness status` names it
            continue
        build = m.meta.get("qairt_build")
        version = qairt_tuple(build) if isinstance(build, str) else None
        if version is not None and isinstance(build, str):
            known.append((version, build, m.name))
    if not known:
        return None
    _v, build, name = max(known)
    return RuntimeQairt(build, f"the runtime {name} on {device.name} (its manifest)", PUSHED_UPDATE)


def device_qairt(transport: Transport, qnn_sdk: str | None = None) -> RuntimeQairt | None:
    """What QAIRT the device will load with when no runtime is pushed alongside (module doc)."""
    if transport.device.emulated:
        return emulator_qairt(qnn_sdk)
    return manifest_qairt(transport)


def retarget_fix(artifact: ModelArtifact, device: DeviceSpec) -> str:
    """How to compile for `device`, in the exporter's own terms."""
    if artifact.kind == "executorch":
        return (f"re-lower for {device.soc_model}: ExecuTorch's examples/qualcomm llama.py --model {device.soc_model} "
                f"(generate_qnn_executorch_compiler_spec(soc_model=QcomChipset.{device.soc_model}, ...))")
    return f"re-export with --soc_id {device.soc_id} --dsp_arch {device.htp_arch}"


def rebuild_fix(artifact: ModelArtifact, runtime_version: str) -> str:
    """How to build the binaries with an older QAIRT, in the exporter's own terms."""
    if artifact.kind == "executorch":
        return (f"re-lower with QAIRT {runtime_version} (QNN_SDK_ROOT naming that SDK when running ExecuTorch's "
                "llama.py / to_edge_transform_and_lower)")
    return f"re-export with QAIRT {runtime_version} (QNN_SDK_ROOT naming that SDK for MNN's --soc_id/--dsp_arch compile)"


def check_qairt(artifact: ModelArtifact, runtime: RuntimeQairt | None) -> None:
    """Refuse context binaries built by a newer QAIRT than the device's runtime (QNN refuses them
    at load: `Using newer context binary on old SDK`, err 5000). Unknown on either side: no verdict."""
    from harness.qnn import loads_on, qairt_version_of

    t = artifact.target
    if not artifact.uses_qnn or t is None or not t.qairt_build or runtime is None:
        return
    if loads_on(t.qairt_build, runtime.build) is not False:
        return
    made_v, runs_v = qairt_version_of(t.qairt_build), qairt_version_of(runtime.build)
    raise PreflightError(
        f"{artifact.root}: QAIRT too new for the runtime: its context binaries were built by QAIRT {made_v} "
        f"({t.qairt_build}, {t.source}) but {runtime.where} is QAIRT {runs_v} ({runtime.build}); QNN does not "
        f"load a context binary from a newer QAIRT (`Using newer context binary on old SDK`, err 5000). "
        f"Nothing was pushed: {runtime.update.format(made=made_v)}, or {rebuild_fix(artifact, runs_v)}",
        LoadAxis.QAIRT_TOO_NEW)


SMOKE_MEMO = "qnn-smoke-loads.json"  # in user_cache_dir(): {"path|size|mtime_ns|build": [rc, QNN's words]}


def binaries_of(artifact: ModelArtifact) -> list[Path]:
    """The files holding the export's context binaries: qnn/graph*.bin and the programs that run."""
    from harness.qnn.compiled_io import binary_files

    files = [artifact.root / rel for rels in binary_files(artifact.root).values() for rel in rels]
    return files + sorted({artifact.root / c for c in artifact.configs.values() if c.endswith(".pte")})


def smoke_load(artifact: ModelArtifact, runtime: RuntimeQairt | None) -> None:
    """Where the host has the runtime's QAIRT release, QNN itself loads each binary on the host's HTP
    emulator before a byte moves: a smoke test of the binary, never of its SoC (the emulator loads any
    SoC's). Each file version is tried once per host library (a memo in the user's cache folder)."""
    from harness.hostfiles import FileKey, user_cache_dir, write_atomic
    from harness.qnn import TrialLoadError, auto_host_qnn, qairt_version_of, trial

    host, _why = auto_host_qnn(None)
    if runtime is None or host is None or qairt_version_of(host.qairt_build) != qairt_version_of(runtime.build):
        return
    memo_path = user_cache_dir() / SMOKE_MEMO
    try:
        memo = json.loads(memo_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        memo = {}
    memo = memo if isinstance(memo, dict) else {}  # a damaged memo costs one more trial, nothing else
    files = binaries_of(artifact)
    keys = {f: f"{k.path}|{k.size}|{k.mtime_ns}|{host.qairt_build}" for f, k in zip(files, FileKey.of_many(files))}
    todo = [f for f, key in keys.items() if key not in memo]
    if todo:
        try:
            found = trial(host.htp_lib, todo)
        except TrialLoadError:
            return  # the host could not ask: no verdict (the load on the device still decides)
        for f in todo:
            bad = [(n, rc, said) for n, (rc, said) in found.items() if n.split("#")[0] == str(f) and rc != 0]
            memo[keys[f]] = [bad[0][1], f"{bad[0][0]}: {bad[0][2]}"] if bad else [0, ""]
        memo_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(memo_path, json.dumps(memo, indent=1))
    failed = [memo[key] for key in keys.values() if memo[key][0] != 0]
    if failed:
        rc, said = failed[0]
        v = qairt_version_of(host.qairt_build)
        raise PreflightError(f"{artifact.root}: the host's QAIRT {v}, the release {runtime.where} runs, refuses to "
                             f"load a context binary on its HTP emulator (contextCreateFromBinary err {rc}: {said}); "
                             f"it will not load on the device either. Nothing was pushed: copy the export again, or "
                             f"{rebuild_fix(artifact, v)}", LoadAxis.CORRUPT)


__all__ = ["EMULATOR_UPDATE", "PUSHED_UPDATE", "LoadAxis", "PreflightError", "RuntimeQairt", "check_qairt",
           "device_qairt", "emulator_qairt", "manifest_qairt", "newest_qairt", "remember_runtime_manifests",
           "remembered_runtime_manifests", "pushed_runtime", "rebuild_fix", "retarget_fix",
           "runner_qairt", "smoke_load"]
