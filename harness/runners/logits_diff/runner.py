"""Running `llm_logits_diff` on a device over two configs of a provisioned model.

    llm_logits_diff configA.json configB.json prompt.txt [max_tokens]
"""

from __future__ import annotations

import posixpath
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.checks import DEFAULT_THRESHOLDS, Thresholds
from harness.errors import HarnessError, TransportError
from harness.pairs import BackendPair
from harness.provision import ProvisionedModel, ProvisionedRuntime
from harness.runners.diff_tools import TOOL, pick_tool
from harness.runners.logits_diff.judge import DiffResult, analyse, chunk_of
from harness.runners.overlay import Overlay, read_remote_config, write_overlay
from harness.runners.prompts import Prompt, images_of, render_prompt_file
from harness.transport import RunsAndMovesFiles

PROMPT_FILE = "prompt.txt"


@dataclass
class LogitsDiffRunner:
    """Runs `llm_logits_diff` from a provisioned runtime (it sits beside llm_demo: provisioning
    pushes every file at the top of the runtime folder) on two configs of a provisioned model.
    Never raises for a failing run: the result's verdict is `error` with the reason."""

    transport: RunsAndMovesFiles
    runtime: ProvisionedRuntime
    model: ProvisionedModel
    keep_run_dirs: bool = False
    tool_name: str = TOOL  # or TOOL_VL (diff_tools.py), whose B sees the images

    @property
    def tool(self) -> str:
        return posixpath.join(self.runtime.remote_dir, self.tool_name)

    @classmethod
    def if_available(cls, transport: RunsAndMovesFiles, runtime: ProvisionedRuntime,
                     model: ProvisionedModel) -> LogitsDiffRunner | None:
        """A runner when the pushed runtime holds llm_logits_diff(_vl), the VL build first."""
        name = pick_tool(transport, runtime.remote_dir) if model.kind == "mnn" else None
        return cls(transport, runtime, model, tool_name=name) if name is not None else None

    def _config(self, backend: BackendPair | str, overlay: Overlay) -> tuple[str, int | None]:
        pair = BackendPair.try_parse(backend)
        name = self.model.configs.get(pair) if pair is not None else None
        if name is None and isinstance(backend, str) and backend.endswith(".json"):
            name = backend
        if name is None:
            have = ", ".join(sorted(map(str, self.model.configs))) or "none"
            raise HarnessError(f"{self.model.device}: model {self.model.remote_dir} has no config for backend "
                               f"{str(backend)!r} (have: {have})")
        path = write_overlay(self.transport, self.model.remote_dir, name, overlay)
        return path, chunk_of(read_remote_config(self.transport, path))

    def run(self, prompt: Prompt | str, *, a: BackendPair | str, b: BackendPair | str, max_tokens: int = 32,
            overlay_a: Overlay | None = None, overlay_b: Overlay | None = None, timeout: float = 600.0,
            extra_env: Mapping[str, str] | None = None,
            thresholds: Thresholds = DEFAULT_THRESHOLDS) -> DiffResult:
        item = Prompt.of(prompt)
        render_prompt_file([item])  # bad prompts fail before touching the device
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise HarnessError(f"{TOOL}: max_tokens must be a positive integer, got {max_tokens!r}")
        run_dir = posixpath.join(self.transport.device.work_dir, "runs",
                                 time.strftime("%Y%m%d-%H%M%S") + "-diff-" + uuid.uuid4().hex[:8])
        started = time.monotonic()
        try:
            cfg_a, chunk_a = self._config(a, overlay_a or Overlay(greedy=True))
            cfg_b, chunk_b = self._config(b, overlay_b or Overlay(greedy=True))
            self._stage(item, run_dir)
            argv = [self.tool, cfg_a, cfg_b, PROMPT_FILE, str(max_tokens)]
            env = {**self.runtime.env(), **(dict(extra_env) if extra_env else {})}
            # cwd = the run folder: the tool writes tmp_diff_a/ and tmp_diff_b/ there.
            res = self.transport.shell(argv, timeout=timeout, cwd=run_dir, env=env)
        except TransportError as exc:
            out = analyse("", "", exit_code=None)
            out.reasons.append(f"transport failure: {exc}")
            out.transport_error, out.fault = str(exc), exc
            out.label_a, out.label_b, out.wall_s = str(a), str(b), time.monotonic() - started
            return out
        exit_code = None if res.timed_out else res.exit_code
        out = analyse(res.stdout, res.stderr, exit_code=exit_code, chunk_a=chunk_a, chunk_b=chunk_b,
                      thresholds=thresholds)
        if res.timed_out:
            out.verdict = "error"
            out.reasons.append(f"{TOOL} timed out after {timeout:.0f} s")
        out.label_a, out.label_b, out.wall_s = str(a), str(b), time.monotonic() - started
        if out.verdict != "error" and not self.keep_run_dirs:
            try:
                self.transport.remove(run_dir, recursive=True)
            except (TransportError, HarnessError):
                pass  # a leftover folder is harmless
        return out

    def _stage(self, prompt: Prompt, run_dir: str) -> None:
        self.transport.makedirs(run_dir)
        with tempfile.TemporaryDirectory(prefix="harness-diff-") as tmp:
            local = Path(tmp) / PROMPT_FILE
            local.write_text(render_prompt_file([prompt]), encoding="utf-8")
            self.transport.push(local, posixpath.join(run_dir, PROMPT_FILE), mode=0o644)
        for name, path in images_of([prompt]).items():
            self.transport.push(path, posixpath.join(run_dir, name), mode=0o644)


