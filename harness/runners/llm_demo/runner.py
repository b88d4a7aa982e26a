"""Runs llm_demo on a device: stage the prompt file and images in a fresh run folder, run with
the provisioned runtime's environment, capture stdout/stderr/logcat, keep a failed run's output."""

from __future__ import annotations

import posixpath
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError, TransportError
from harness.evidence import Clock
from harness.pairs import BackendPair
from harness.provision import ProvisionedModel, ProvisionedRuntime
from harness.runners.base import RunnerKind
from harness.runners.llm_demo.output import PromptOutput
from harness.runners.llm_demo.result import LOGCAT_TAG, LlmDemoResult, ProcessRun, analyse
from harness.runners.overlay import Overlay, write_overlay
from harness.runners.prompts import Prompt, images_of, render_prompt_file
from harness.runners.signatures import SignatureSet, load_signatures
from harness.transport import LogcatService, Transport, check_wire_text

PROMPT_FILE = "prompts.txt"
OUTPUT_FILES = ("stdout.txt", "stderr.txt", "logcat.txt")  # kept in a failed run's folder


@dataclass
class LlmDemoRunner:
    """Runs llm_demo from a provisioned runtime on a provisioned model.

    logcat: "clear", "since" or "off": how each process's slice is taken (the device service
    harness/transport/logcat.py). Devices without a `logcat` command (Linux boards over ssh)
    simply get no logcat slice.
    """

    transport: Transport
    runtime: ProvisionedRuntime
    model: ProvisionedModel
    logcat: str = "clear"
    logcat_tags: tuple[str, ...] = (LOGCAT_TAG,)
    keep_run_dirs: bool = False  # failed runs always keep theirs (for debugging)
    signatures: SignatureSet = field(default_factory=load_signatures)

    def __post_init__(self) -> None:
        self._logcat = LogcatService(self.transport, self.logcat, tuple(self.logcat_tags))
        self._finished_dirs: list[str] = []  # clean run dirs, removed with the next staging

    @property
    def kind(self) -> RunnerKind:
        return RunnerKind.LLM_DEMO

    @property
    def timing(self) -> Clock:
        return self.transport.device.timing

    def config_for(self, backend: BackendPair | str) -> str:
        """Config file name for a backend pair (as provisioning named them) or a file name."""
        if backend in self.model.configs:
            return self.model.configs[BackendPair.parse(backend)]
        if isinstance(backend, str) and backend.endswith(".json"):
            return backend
        have = ", ".join(sorted(map(str, self.model.configs))) or "none"
        raise HarnessError(f"{self.model.device}: model {self.model.remote_dir} has no config for backend "
                           f"{str(backend)!r} (have: {have}); pick one of them or pass a config file name")

    def run(self, prompts: Sequence[Prompt | str], *, backend: BackendPair | str = "qnn", overlay: Overlay | None = None,
            max_tokens: int | None = None, one_per_process: bool = True, timeout: float = 600.0,
            extra_env: Mapping[str, str] | None = None) -> LlmDemoResult:
        """Run the prompts; never raises for a failing run (the result carries the class).
        HarnessError only for bad input (no such backend, prompt that llm_demo would mangle)."""
        items = [Prompt.of(p) for p in prompts]
        render_prompt_file(items)  # validate every prompt before touching the device
        for i, p in enumerate(items):  # and what the prompt file's UTF-8 cannot hold (NUL, lone surrogates)
            check_wire_text(p.text, f"prompt #{i + 1}" + (f" ({p.id})" if p.id else ""))
        images_of(items)
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 0):
            raise HarnessError(f"max_tokens must be a non-negative integer or None, got {max_tokens!r}")
        config_name = self.config_for(backend)
        overlay = overlay if overlay is not None else Overlay()
        try:
            config = write_overlay(self.transport, self.model.remote_dir, config_name, overlay)
        except TransportError as exc:
            return self._transport_failure(items, exc)
        groups = [[p] for p in items] if one_per_process else [items]
        # The decode limit per prompt (docs/llm-demo-output.md#arguments): argv's max_token_number, else max_new_tokens.
        limit = max_tokens if max_tokens is not None else overlay.max_new_tokens
        runs = [self._run_process(g, config, max_tokens, timeout, extra_env, limit) for g in groups]
        outs: list[PromptOutput] = []
        for r in runs:
            outs += r.parsed.prompts
        return LlmDemoResult(runs, outs)

    # -- one process
    def _run_process(self, prompts: list[Prompt], config: str, max_tokens: int | None, timeout: float,
                     extra_env: Mapping[str, str] | None, token_limit: int | None = None) -> ProcessRun:
        texts = [p.text for p in prompts]
        run_dir = posixpath.join(self.transport.device.work_dir, "runs",
                                 time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:8])
        argv = [self.runtime.runner, config, PROMPT_FILE] + ([str(max_tokens)] if max_tokens is not None else [])
        env = {**self.runtime.env(), **(dict(extra_env) if extra_env else {})}
        stdout = stderr = ""
        exit_code: int | None = None
        timed_out = False
        transport_error = None
        fault: TransportError | None = None
        logcat_text: str | None = None
        wall = 0.0
        try:
            self._stage(prompts, run_dir)
            self._logcat.start()
            started = time.monotonic()
            res = self.transport.shell(argv, timeout=timeout, cwd=run_dir, env=env)
            wall = time.monotonic() - started
            stdout, stderr, exit_code, timed_out = res.stdout, res.stderr, res.exit_code, res.timed_out
            logcat_text = self._logcat.stop()
        except TransportError as exc:
            transport_error, fault = str(exc), exc
        parsed, cls = analyse(stdout, stderr, exit_code=None if transport_error else exit_code, logcat=logcat_text,
                              prompts=texts, timed_out=timed_out, transport_error=transport_error,
                              signatures=self.signatures, logcat_tags=self.logcat_tags, token_limit=token_limit)
        run = ProcessRun(argv, texts, stdout, stderr, logcat_text, exit_code, timed_out, wall, parsed, cls, run_dir,
                         fault=fault, env=env)
        if not cls.ok and transport_error is None:
            self._keep_output(run)
        if cls.ok and not self.keep_run_dirs and transport_error is None:
            # Removed by the next staging command (or cleanup()): no round trip on the hot path.
            self._finished_dirs.append(run_dir)
        return run

    def _keep_output(self, run: ProcessRun) -> None:
        """A failed run's folder keeps what it printed (stdout.txt, stderr.txt, logcat.txt)
        beside prompts.txt, so a person can see where it stopped or hung."""
        outputs = {OUTPUT_FILES[0]: run.stdout, OUTPUT_FILES[1]: run.stderr}
        if run.logcat is not None:
            outputs[OUTPUT_FILES[2]] = run.logcat
        try:
            with tempfile.TemporaryDirectory(prefix="harness-out-") as tmp:
                for name, text in outputs.items():
                    local = Path(tmp) / name
                    local.write_text(text, encoding="utf-8")
                    self.transport.push(local, posixpath.join(run.run_dir, name), mode=0o644)
        except (TransportError, HarnessError, OSError):
            pass  # the record keeps the output anyway

    def cleanup(self) -> None:
        """Remove the run folders of clean runs still on the device (failed runs stay)."""
        done, self._finished_dirs = self._finished_dirs, []
        if done:
            try:
                self.transport.remove(*done, recursive=True)
            except (TransportError, HarnessError):
                pass  # leftovers are harmless

    def _stage(self, prompts: list[Prompt], run_dir: str) -> None:
        done, self._finished_dirs = self._finished_dirs, []
        # One command makes this run's folder and removes the clean ones before it.
        self.transport.quick(["sh", "-c", 'mkdir -p "$1" && shift && rm -rf -- "$@"', "sh", run_dir, *done])
        with tempfile.TemporaryDirectory(prefix="harness-run-") as tmp:
            local = Path(tmp) / PROMPT_FILE
            local.write_text(render_prompt_file(prompts), encoding="utf-8")
            self.transport.push(local, posixpath.join(run_dir, PROMPT_FILE), mode=0o644)
        for name, path in images_of(prompts).items():
            self.transport.push(path, posixpath.join(run_dir, name), mode=0o644)

    def _transport_failure(self, items: list[Prompt], fault: TransportError) -> LlmDemoResult:
        texts = [p.text for p in items]
        parsed, cls = analyse("", "", exit_code=None, prompts=texts, transport_error=str(fault),
                              signatures=self.signatures)
        run = ProcessRun([], texts, "", "", None, None, False, 0.0, parsed, cls, fault=fault)
        return LlmDemoResult([run], parsed.prompts)
