"""The ExecuTorch runner a suite drives (runners/base.py `SuiteRunner`, kind `executorch`): the
LLM runner (`qnn_llama_runner`, or on the host ExecuTorch's real TextLLMRunner behind its
flags), a program's forward through the pybindings (`pte_runner`, host runtimes only:
harness.hostrt.executorch.forward) and `qnn_executor_runner` for an ETDump on a device.

Every run is a process of its own started through the transport with the runtime's
environment: on an emulated HTP that environment carries the host's QAIRT libraries
(provision/emulator.py), so the QNN-delegated parts run on the emulator and the harness's
own process never loads QNN.
"""

from __future__ import annotations

import posixpath
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, TransportError
from harness.evidence import Clock
from harness.hostrt.executorch import SCRIPT_NAME, parse_result
from harness.provision import ProvisionedRuntime
from harness.runners.base import RunnerKind
from harness.runners.executorch.device_runners import QnnExecutorRunner, QnnLlamaRunner
from harness.runners.signatures import Classification, SignatureSet, load_signatures
from harness.transport import RunsAndMovesFiles


@dataclass
class PteRun:
    """One `pte_runner` process: what it printed, its RESULT facts, and its class."""

    argv: list[str]
    stdout: str
    stderr: str
    exit_code: int | None
    wall_s: float
    classification: Classification
    result: dict[str, Any] | None = None
    output: Path | None = None  # the first output (.npy) on the host
    etdump: Path | None = None

    @property
    def ok(self) -> bool:
        return self.classification.ok and self.result is not None

    @property
    def run_s(self) -> list[float]:
        return [float(t) for t in (self.result or {}).get("run_s", [])]

    def failure(self) -> str:
        cls = self.classification
        lines = [cls.reason, *cls.errors[:3]] if not cls.ok else ["no RESULT line: the run stopped before it"]
        tail = [ln for ln in self.stderr.splitlines() if ln.strip()][-3:]
        return "; ".join(x for x in [*lines, *tail] if x)


@dataclass
class ExecutorchRunner:
    """The suite's ExecuTorch runner on one device and runtime; `workspace` is the device
    folder runs start in (QNN may leave files in the working directory)."""

    transport: RunsAndMovesFiles
    runtime: ProvisionedRuntime
    workspace: str
    signatures: SignatureSet = field(default_factory=load_signatures)

    @property
    def kind(self) -> RunnerKind:
        return RunnerKind.EXECUTORCH

    @property
    def timing(self) -> Clock:
        return self.transport.device.timing

    @property
    def has_forward(self) -> bool:
        """The runtime holds `pte_runner` (the host runtimes: harness.hostrt.executorch.make_runtime_dir)."""
        return self.transport.exists(posixpath.join(self.runtime.remote_dir, SCRIPT_NAME))

    def llama(self, model_dir: str) -> QnnLlamaRunner:
        return QnnLlamaRunner(self.transport, self.runtime, model_dir, self.signatures)

    def executor(self, model_dir: str) -> QnnExecutorRunner:
        return QnnExecutorRunner(self.transport, self.runtime, model_dir, self.signatures)

    def forward(self, pte: str, inputs: Sequence[str], *, local_dir: Path, iterations: int = 1,
                etdump: bool = False, timeout: float = 600.0,
                extra_env: Mapping[str, str] | None = None, tokens: str | None = None,
                profile_level: int | None = None) -> PteRun:
        """`pte`'s forward on `inputs` (.npy paths on the device); the first output and the
        ETDump are pulled into `local_dir`. `tokens` (a .npy on the device): a KV program run
        teacher-forced over its rows instead, the output its logits at every step.
        `profile_level`: QNN's profiling at run time (2: per-op cycles in the ETDump), as
        qnn_executor_runner's `--profile_level`."""
        tag = uuid.uuid4().hex[:8]
        out_dir = posixpath.join(self.workspace, "outputs", tag)
        output, dump = posixpath.join(out_dir, "output.npy"), posixpath.join(out_dir, "run.etdp")
        argv = [posixpath.join(self.runtime.remote_dir, SCRIPT_NAME), "--model_path", pte,
                "--output", output, "--iterations", str(iterations)]
        for x in inputs:
            argv += ["--input", x]
        if etdump:
            argv += ["--etdump", dump]
        if tokens:
            argv += ["--tokens", tokens]
        if profile_level is not None:
            argv += ["--profile_level", str(profile_level)]
        env = {**self.runtime.env(), **(dict(extra_env) if extra_env else {})}
        started = time.monotonic()
        try:
            self.transport.makedirs(out_dir)
            res = self.transport.shell(argv, timeout=timeout, cwd=out_dir, env=env)
        except (TransportError, HarnessError) as exc:
            cls = self.signatures.classify(transport_error=str(exc))
            return PteRun(argv, "", "", None, time.monotonic() - started, cls)
        cls = self.signatures.classify(stdout=res.stdout, stderr=res.stderr, exit_code=res.exit_code,
                                       timed_out=res.timed_out)
        run = PteRun(argv, res.stdout, res.stderr, res.exit_code, res.duration_s, cls, parse_result(res.stdout))
        if run.ok:
            local_dir.mkdir(parents=True, exist_ok=True)
            run.output = self._pull(output, local_dir / f"{tag}-output.npy")
            run.etdump = self._pull(dump, local_dir / f"{tag}.etdp") if etdump else None
        return run

    def _pull(self, remote: str, local: Path) -> Path | None:
        try:
            if not self.transport.exists(remote):
                return None
            self.transport.pull(remote, local)
            return local
        except TransportError:
            return None

    def cleanup(self) -> None:
        try:
            self.transport.remove(posixpath.join(self.workspace, "outputs"), recursive=True)
        except (TransportError, HarnessError):
            pass  # leftovers are harmless


__all__ = ["ExecutorchRunner", "PteRun"]
