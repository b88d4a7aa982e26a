"""ExecuTorch QNN runners on a device: `qnn_llama_runner` (LLM) and `qnn_executor_runner`
(any .pte, with ETDump). Flags and outputs as in ExecuTorch 1.5 (docs/executorch-runner.md):

  * qnn_llama_runner: gflags; no `--kv_updater` (gone since 1.1; passing it fails parsing);
    stdout carries `PyTorchObserver {json}`; `--output_path` gets prompt+text,
    `--performance_output_path` a single tokens/s number.
  * qnn_executor_runner: `--etdump_path` writes the ETDump that `harness.runners.executorch.etdump` reads.

What the runner prints is read by `harness.runners.executorch.output` (the real runner's
facts); `python -m harness.runners.executorch STDOUT [--stderr F] [--exit-code N] [--json]`
classifies a captured run (`cli.py`). On the host, ExecuTorch's real LLM runner
takes the runner's place (`harness.hostrt.executorch`): it writes no outputs.txt /
inference_speed.txt, so the text is read from stdout when the file is absent.
"""

from __future__ import annotations

import posixpath
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError, TransportError
from harness.provision import ProvisionedRuntime
from harness.runners.executorch.output import RunOutput, observer_metrics, parse_run
from harness.runners.signatures import Classification, SignatureSet, load_signatures
from harness.transport import RunsAndMovesFiles

EVAL_MODES = {0: "kv", 1: "hybrid", 2: "lookahead"}


def parse_inference_speed(text: str) -> float | None:
    try:
        return float(text.strip().split()[0])
    except (ValueError, IndexError):
        return None


@dataclass(frozen=True)
class LlamaRunConfig:
    """qnn_llama_runner flags (defaults as the runner's gflags)."""

    model_path: str  # .pte, relative to the workspace or absolute
    tokenizer_path: str
    prompts: tuple[str, ...] = ()
    decoder_model_version: str = "llama3"
    seq_len: int = 128
    eval_mode: int = 1
    temperature: float = 0.0
    system_prompt: str = ""
    shared_buffer: bool = True
    num_iters: int = 1
    tokenized_prompt: str = ""
    attention_sink_rope_path: str = ""
    dump_logits_path: str = ""
    ngram: int = 0
    window: int = 0
    gcap: int = 0

    def __post_init__(self) -> None:
        if self.eval_mode not in EVAL_MODES:
            raise HarnessError(f"eval_mode {self.eval_mode} is not one of {sorted(EVAL_MODES)} (0 kv, 1 hybrid, 2 lookahead)")
        if self.tokenized_prompt and self.prompts:
            raise HarnessError("give either prompts or tokenized_prompt, not both (the runner rejects both)")
        if not self.tokenized_prompt and not self.prompts:
            raise HarnessError("qnn_llama_runner needs at least one prompt")
        if self.dump_logits_path and self.eval_mode != 0:
            raise HarnessError("dump_logits_path requires eval_mode 0 (the runner's rule)")
        if self.seq_len < 1:
            raise HarnessError(f"seq_len must be positive, got {self.seq_len}")

    def argv(self, runner: str, output_path: str, performance_path: str) -> list[str]:
        a = [runner, "--decoder_model_version", self.decoder_model_version, "--tokenizer_path", self.tokenizer_path,
             "--output_path", output_path, "--performance_output_path", performance_path,
             "--model_path", self.model_path, "--eval_mode", str(self.eval_mode),
             "--temperature", repr(float(self.temperature)), "--seq_len", str(self.seq_len)]
        if self.shared_buffer:
            a.append("--shared_buffer")
        if self.system_prompt:
            a += ["--system_prompt", self.system_prompt]
        if self.attention_sink_rope_path:
            a += ["--attention_sink_rope_path", self.attention_sink_rope_path]
        if self.dump_logits_path:
            a += ["--dump_logits_path", self.dump_logits_path]
        if self.num_iters != 1:
            a += ["--num_iters", str(self.num_iters)]
        if self.eval_mode == 2:
            a += ["--window", str(self.window), "--gcap", str(self.gcap), "--ngram", str(self.ngram)]
        if self.tokenized_prompt:
            a += ["--tokenized_prompt", self.tokenized_prompt]
        for p in self.prompts:
            a += ["--prompt", p]
        return a


@dataclass
class EtRunResult:
    argv: list[str]
    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    wall_s: float
    classification: Classification
    stats: dict[str, object] | None = None
    outputs_text: str | None = None
    inference_speed: float | None = None
    files: dict[str, Path] = field(default_factory=dict)  # pulled host copies
    output: RunOutput | None = None

    @property
    def ok(self) -> bool:
        return self.classification.ok

    @property
    def text(self) -> str:
        """The generated text: outputs.txt when the runner wrote one, else what stdout shows."""
        if self.outputs_text is not None:
            return self.outputs_text
        return "\n".join(self.output.texts) if self.output else ""

    @property
    def problems(self) -> list[str]:
        """What does not add up in the runner's own numbers (executorch_output.parse_run)."""
        return list(self.output.problems) if self.output else []

    def to_json(self) -> dict[str, object]:
        return {"class": self.classification.cls, "errors": self.classification.errors,
                "signatures": self.classification.signature_ids, "exit_code": self.exit_code,
                "stats": self.stats, "metrics": observer_metrics(self.stats) if self.stats else None,
                "inference_speed": self.inference_speed, "outputs": self.outputs_text,
                "problems": self.problems, "wall_s": round(self.wall_s, 3)}


@dataclass
class _Base:
    transport: RunsAndMovesFiles
    runtime: ProvisionedRuntime
    workspace: str  # folder holding the .pte/tokenizer (the cwd of the run)
    signatures: SignatureSet = field(default_factory=load_signatures)

    def _exec(self, argv: list[str], timeout: float, extra_env: Mapping[str, str] | None,
              expect_observer: bool) -> tuple[EtRunResult, bool]:
        env = {**self.runtime.env(), **(dict(extra_env) if extra_env else {})}
        started = time.monotonic()
        try:
            res = self.transport.shell(argv, timeout=timeout, cwd=self.workspace, env=env)
        except TransportError as exc:
            cls = self.signatures.classify(transport_error=str(exc))
            return EtRunResult(argv, "", "", None, False, time.monotonic() - started, cls), False
        output = parse_run(res.stdout, res.stderr)
        stats = output.stats
        cls = self.signatures.classify(stdout=res.stdout, stderr=res.stderr, exit_code=res.exit_code,
                                       timed_out=res.timed_out)
        if cls.ok and expect_observer and stats is None:
            msg = "no PyTorchObserver line on stdout (the runner stopped before its report)"
            cls = Classification("runtime-error", msg, cls.matches, [msg])
        return EtRunResult(argv, res.stdout, res.stderr, res.exit_code, res.timed_out, res.duration_s, cls,
                           stats=stats, output=output), True

    def _pull(self, remote: str, local_dir: Path) -> Path | None:
        try:
            if not self.transport.exists(remote):
                return None
            dst = local_dir / posixpath.basename(remote)
            self.transport.pull(remote, dst)
            return dst
        except TransportError:
            return None


@dataclass
class QnnLlamaRunner(_Base):
    def run(self, config: LlamaRunConfig, *, timeout: float = 600.0, local_dir: Path | None = None,
            extra_env: Mapping[str, str] | None = None) -> EtRunResult:
        out_dir = posixpath.join(self.workspace, "outputs", uuid.uuid4().hex[:8])
        outputs = posixpath.join(out_dir, "outputs.txt")
        speed = posixpath.join(out_dir, "inference_speed.txt")
        try:
            self.transport.makedirs(out_dir)
        except (TransportError, HarnessError) as exc:
            return EtRunResult([], "", "", None, False, 0.0, self.signatures.classify(transport_error=str(exc)))
        argv = config.argv(self.runtime.runner, outputs, speed)
        result, reached = self._exec(argv, timeout, extra_env, expect_observer=True)
        if not reached:
            return result
        local = Path(local_dir) if local_dir else Path(tempfile.mkdtemp(prefix="harness-et-"))
        for remote in (outputs, speed):
            p = self._pull(remote, local)
            if p is not None:
                result.files[p.name] = p
        if "outputs.txt" in result.files:
            result.outputs_text = result.files["outputs.txt"].read_text(encoding="utf-8", errors="replace")
        if "inference_speed.txt" in result.files:
            result.inference_speed = parse_inference_speed(result.files["inference_speed.txt"].read_text())
        return result


@dataclass
class QnnExecutorRunner(_Base):
    """Runs a .pte with an input list and pulls the ETDump (analyse with harness.runners.executorch.etdump)."""

    def run(self, model_path: str, *, input_list: str = "input_list.txt", timeout: float = 600.0,
            local_dir: Path | None = None, shared_buffer: bool = False, iterations: int = 1,
            extra_env: Mapping[str, str] | None = None, extra_args: Sequence[str] = ()) -> EtRunResult:
        tag = uuid.uuid4().hex[:8]
        out_dir = posixpath.join(self.workspace, "outputs", tag)
        etdump = posixpath.join(self.workspace, f"etdump-{tag}.etdp")
        try:
            self.transport.makedirs(out_dir)
        except (TransportError, HarnessError) as exc:
            return EtRunResult([], "", "", None, False, 0.0, self.signatures.classify(transport_error=str(exc)))
        argv = [self.runtime.runner, "--model_path", model_path, "--output_folder_path", out_dir,
                "--input_list_path", input_list, "--etdump_path", etdump, "--method_index", "0",
                "--iteration", str(iterations)] + (["--shared_buffer"] if shared_buffer else []) + list(extra_args)
        result, reached = self._exec(argv, timeout, extra_env, expect_observer=False)
        if not reached:
            return result
        local = Path(local_dir) if local_dir else Path(tempfile.mkdtemp(prefix="harness-et-"))
        p = self._pull(etdump, local)
        if p is not None:
            result.files["etdump"] = p
        elif result.classification.ok:
            result.classification = Classification("runtime-error", f"no ETDump at {etdump}",
                                                   result.classification.matches, [f"no ETDump written to {etdump}"])
        return result

