"""Real QNN context binaries and programs for the virtual lab, built by the host's QNN once per
machine (or per test run: the cache lives under harness.hostfiles.user_cache_dir(), or under
$VLAB_QNN_CACHE_DIR when set: the tests point it at their run's temp folder, so a test that gives the
harness a cache folder of its own does not lower the lab's programs again) and cached.

`find_builder()` answers whether this host can build them: ExecuTorch's Qualcomm backend and the
host's x86 QAIRT libraries (the `qnn` extra: the onnxruntime-qnn wheel, or --qnn-sdk/$QNN_SDK_ROOT)
must both be there; without them the virtual lab writes its stand-ins. The cache folder is named
after the toolchain (this builder's version, the host's QAIRT build, the ExecuTorch version), so
a new QAIRT or ExecuTorch never reuses an old binary; each file is keyed by what it holds (SoC,
graph names and dims) and written under a temp name, then renamed. The building itself runs in
child processes with the QNN environment (virtual_lab.qnn_graphs, virtual_lab.qnn_build).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.hostfiles import user_cache_dir
from harness.qnn import HOST_QNN_SWITCH, HostQnn, auto_host_qnn
from virtual_lab.qnn_build import ProgramSpec, QnnBuildError, build_programs

_VERSION = "2"  # bump when the graphs change (virtual_lab.qnn_graphs): old cache entries are not reused
_REPO = Path(__file__).resolve().parents[1]
VLAB_CACHE_ENV = "VLAB_QNN_CACHE_DIR"  # the lab's built files apart from the harness's own cache
LAB_SOCS = ("SM8750", "SM8650", "SA8295")  # the virtual lab's devices (virtual_lab.lab)

Dims = tuple[int, ...]


@dataclass(frozen=True)
class GraphSpec:
    """One graph of a context binary: its name and its tensors' names and dims, in order."""

    name: str
    inputs: tuple[tuple[str, Dims], ...]
    outputs: tuple[tuple[str, Dims], ...]

    def to_json(self) -> dict:
        return {"name": self.name, "inputs": [[n, list(d)] for n, d in self.inputs],
                "outputs": [[n, list(d)] for n, d in self.outputs]}


@dataclass(frozen=True)
class BinarySpec:
    soc: str  # QcomChipset name, e.g. "SM8650"
    graphs: tuple[GraphSpec, ...]

    def key(self) -> str:
        text = json.dumps([self.soc, [g.to_json() for g in self.graphs]], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def file_name(self) -> str:
        return f"{self.soc.lower()}-{self.key()}.bin"


@dataclass(frozen=True)
class QnnBuilder:
    """Builds and caches the virtual lab's real QNN files with one host's QNN."""

    host: HostQnn
    cache: Path  # <user cache>/vlab-qnn/<toolchain key>
    toolchain: str  # "builder 1, QAIRT v2.49.40.260810104044, ExecuTorch 1.5.1"
    timeout: float = 900.0

    def child_env(self) -> dict[str, str]:
        env = self.host.child_env({k: v for k, v in os.environ.items() if k != HOST_QNN_SWITCH})
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO), env.get("PYTHONPATH", "")]))
        return env

    def context_binaries(self, specs: Sequence[BinarySpec]) -> dict[BinarySpec, Path]:
        """The cached binary of each spec; the missing ones built by one child."""
        found = {spec: self.cache / "bin" / spec.file_name() for spec in specs}
        missing = list(dict.fromkeys(s for s, p in found.items() if not p.is_file()))
        for soc in sorted({s.soc for s in missing}):
            jobs = [s for s in missing if s.soc == soc]
            self._build(self._option(soc), {s: found[s] for s in jobs})
        return found

    def programs(self, specs: Sequence[ProgramSpec]) -> dict[ProgramSpec, Path]:
        """Tiny ExecuTorch programs lowered for QNN (virtual_lab.qnn_build), cached here."""
        return build_programs(specs, self.cache / "programs", self.child_env(), self.timeout)

    def _option(self, soc: str) -> Path:
        path = self._option_path(soc)
        if not path.is_file():  # one child (and one torch import, ~10 s) for the lab's SoCs at once
            socs = [s for s in dict.fromkeys([soc, *LAB_SOCS]) if not self._option_path(s).is_file()]
            path.parent.mkdir(parents=True, exist_ok=True)
            tmps = {s: self._option_path(s).with_name(f".{s.lower()}.{os.getpid()}.tmp") for s in socs}
            try:
                self._child([a for s in socs for a in ("--option", s, str(tmps[s]))],
                            f"the QnnManager options for {', '.join(socs)}")
                for s, tmp in tmps.items():
                    tmp.replace(self._option_path(s))
            finally:
                for tmp in tmps.values():
                    tmp.unlink(missing_ok=True)
        return path

    def _option_path(self, soc: str) -> Path:
        return self.cache / "options" / f"{soc.lower()}.option"

    def _build(self, option: Path, jobs: Mapping[BinarySpec, Path]) -> None:
        next(iter(jobs.values())).parent.mkdir(parents=True, exist_ok=True)
        tmps = {spec: path.with_name(f".{path.name}.{os.getpid()}.tmp") for spec, path in jobs.items()}
        job_file = next(iter(jobs.values())).parent / f".jobs.{os.getpid()}.json"
        job_file.write_text(json.dumps({"option": str(option), "binaries": [
            {"out": str(tmps[s]), "graphs": [g.to_json() for g in s.graphs]} for s in jobs]}), encoding="utf-8")
        try:
            self._child(["--jobs", str(job_file)], f"{len(jobs)} context binaries")
            for spec, tmp in tmps.items():
                if not tmp.is_file():
                    raise QnnBuildError(f"building {jobs[spec].name} wrote no file")
                tmp.replace(jobs[spec])
        finally:
            job_file.unlink(missing_ok=True)
            for tmp in tmps.values():
                tmp.unlink(missing_ok=True)

    def _child(self, args: list[str], what: str) -> None:
        cmd = [sys.executable, "-m", "virtual_lab.qnn_graphs", *args]
        try:
            with tempfile.TemporaryDirectory(prefix="vlab-qnn-") as cwd:  # QNN drops files into its cwd
                proc = subprocess.run(cmd, cwd=cwd, env=self.child_env(), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            raise QnnBuildError(f"building {what} with {self.toolchain} took over {self.timeout:.0f} s") from None
        if proc.returncode != 0:
            raise QnnBuildError(f"building {what} with {self.toolchain} failed (exit {proc.returncode}): "
                                f"{proc.stdout[-1500:]}")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _executorch_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("executorch")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=4)
def _find(cache_root: str, qnn_sdk_root: str) -> tuple[QnnBuilder | None, str]:
    if not _installed("executorch.backends.qualcomm"):
        return None, "ExecuTorch's Qualcomm backend is not installed (pip install 'harness[executorch]')"
    env = {k: v for k, v in os.environ.items() if k != HOST_QNN_SWITCH}
    host, why = auto_host_qnn(environ=env)
    if host is None:
        return None, f"no host QAIRT libraries to build with: {why}"
    toolchain = f"builder {_VERSION}, QAIRT {host.qairt_build}, ExecuTorch {_executorch_version()}"
    key = hashlib.sha256(toolchain.encode()).hexdigest()[:12]
    return QnnBuilder(host, Path(cache_root) / "vlab-qnn" / key, toolchain), ""


def find_builder() -> tuple[QnnBuilder | None, str]:
    """(the builder, "") when this host can build real QNN files, else (None, why not)."""
    return _find(os.environ.get(VLAB_CACHE_ENV) or str(user_cache_dir()), os.environ.get("QNN_SDK_ROOT", ""))


__all__ = ["VLAB_CACHE_ENV", "BinarySpec", "GraphSpec", "QnnBuildError", "QnnBuilder", "find_builder"]
