"""Run MNN `llm_demo` on a device and turn what it printed into a result with a failure class.

    llm_demo CONFIG PROMPT_FILE [max_token_number]        (docs/llm-demo-output.md#arguments)

The runner writes the prompt file itself (one prompt per line, image tags), pushes it and
its images into a fresh run folder that is also the cwd (llm_demo writes `tmp*` there and
opens images relative to it), writes a derived config (greedy etc.) next to the export's
config, runs with LD_LIBRARY_PATH/ADSP_LIBRARY_PATH of the pushed runtime, and captures
stdout, stderr and the MNNJNI logcat slice of the run (Android builds with MNN_USE_LOGCAT
print every MNN_PRINT line, the summary block and the `[Error]` lines included, to logcat).

Splitting text per prompt: llm_demo prints nothing between prompts except the EOS newline
(`end_with`), and nothing at all when a prompt stops at the token limit. So:
  * one prompt per process (the default) is exact: the text is everything between
    `prompt file is ...` and the summary block, minus MNN log lines, minus the final EOS newline;
  * several prompts per process are split at newlines. That is right only when every answer
    is a single line that ended on EOS; when the count of pieces does not match the count of
    prompts the result says `split_exact=False` and keeps the whole text in `raw_text`.
    After the first INTERNAL_ERROR every later prompt of the same process is poisoned
    (`[Error]: LLM in error state. Status: 4`) and marked invalid.

CLI: `python -m harness.runners.llm_demo STDOUT_FILE [--stderr FILE] [--exit-code N]
[--logcat FILE] [--prompts N] [--max-tokens N]` prints one JSON object: class, texts, summary,
errors, ... Without --prompts the count is read from the prompt file the run names
(`prompt file is ...`); without --max-tokens the limit is the named config's max_new_tokens.
`stopped_on_eos` is true only for a prompt that ended before its token limit.
Strict JSON has no NaN/Infinity: non-finite summary values are written as null, and the text
llm_demo printed for them (`nan`, `-nan`, `inf`) is listed under `summary_nonfinite`.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import re
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.errors import HarnessError, TransportError
from harness.provision.types import ProvisionedModel, ProvisionedRuntime
from harness.runners.overlay import Overlay, write_overlay
from harness.runners.prompts import Prompt, count_prompt_lines, images_of, render_prompt_file
from harness.transport.command import check_wire_text
from harness.runners.signatures import (
    Classification, SignatureSet, load_signatures, logcat_messages, signal_name, signal_of,
)
from harness.runners.summary import Summary, find_summary, parse_summary_lines
from harness.transport.base import Transport
from harness.transport.logcat import LogcatService

LOGCAT_TAG = "MNNJNI"
PROMPT_FILE = "prompts.txt"
DEFAULT_MAX_NEW_TOKENS = 512  # llmconfig.hpp (docs/llm-demo-output.md#arguments)
OUTPUT_FILES = ("stdout.txt", "stderr.txt", "logcat.txt")  # kept in a failed run's folder

# MNN log lines that can land inside the generated text on stdout (non-logcat builds).
# Searched anywhere in a line: after a max-token stop the next line is glued to the text.
_LOG_LINE = re.compile(
    r"(?:\[Error\]: |\[MNN:LLM\] |\[POSDBG\]|Error: (?:Response )?[Gg]eneration failed|MNN_QNN: |QNN: |"
    r"Error in file \S+, line \d+|Broad cast error, |Compute Shape Error for |code=\d+ in \w+, \d+|"
    r"Omni Can't open image|Qwen-VL smart resize|Warning: module need new clone|"
    r"Could not create system context handle|Can't find mask from qnn model)[^\n]*\n?"
)
# Lines that end the current prompt: it failed and printed no EOS newline.
_PROMPT_END = re.compile(r"\[Error\]: LLM in error state|Error: (?:Response )?[Gg]eneration failed")
_PROMPT_FILE_LINE = re.compile(r"^prompt file is [^\n]*\n", re.M)


@dataclass
class PromptOutput:
    prompt: str
    text: str | None  # generated text without the EOS newline; None: did not run or poisoned
    stopped_on_eos: bool | None = None  # False: stopped at the token limit
    errors: list[str] = field(default_factory=list)  # MNN error lines printed during this prompt
    valid: bool = True  # False when the prompt failed, was poisoned or could not be attributed

    def to_json(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "text": self.text, "stopped_on_eos": self.stopped_on_eos,
                "errors": self.errors, "valid": self.valid}


@dataclass
class ParsedOutput:
    prompts: list[PromptOutput]
    summary: Summary | None
    summary_source: str | None  # stdout | logcat
    raw_text: str  # the generated-text region with MNN log lines removed
    split_exact: bool
    log_lines: list[str] = field(default_factory=list)  # MNN lines removed from the text region

    @property
    def texts(self) -> list[str | None]:
        return [p.text for p in self.prompts]


def _text_region(stdout: str) -> tuple[str, Summary | None]:
    matches = list(_PROMPT_FILE_LINE.finditer(stdout))
    summary = find_summary(stdout)
    if not matches:
        return "", summary
    start = matches[-1].end()
    end = summary.start if summary is not None and summary.start >= start else len(stdout)
    return stdout[start:end], summary


def parse_output(stdout: str, prompts: Sequence[str] | int | None = None,
                 logcat: Sequence[str] = (), token_limit: int | None = None) -> ParsedOutput:
    """Split one process's stdout into per-prompt texts and find its summary block.

    `prompts`: the prompt texts (or just their number) of this process; None = unknown,
    then every EOS-terminated piece counts as one prompt. `logcat`: message texts of the run.
    `token_limit`: the decode limit of the run (max_token_number or max_new_tokens); a prompt
    whose decode count reached it stopped at the limit even when its last token was a newline.
    """
    names: list[str] | None
    if isinstance(prompts, int):
        names = [""] * prompts
    else:
        names = list(prompts) if prompts is not None else None
    region, summary = _text_region(stdout)
    source = "stdout" if summary else None
    if summary is None and logcat:
        summary = parse_summary_lines(list(logcat))
        source = "logcat" if summary else None

    pieces: list[tuple[str, str]] = []
    pos = 0
    for m in _LOG_LINE.finditer(region):
        if m.start() > pos:
            pieces.append(("text", region[pos:m.start()]))
        pieces.append(("log", m.group().rstrip("\n")))
        pos = m.end()
    if pos < len(region):
        pieces.append(("text", region[pos:]))
    raw_text = "".join(s for k, s in pieces if k == "text")
    log_lines = [s for k, s in pieces if k == "log"]

    if names is not None and len(names) == 1:
        # One prompt per process: exact.
        failed = any(_PROMPT_END.search(s) for s in log_lines)
        eos = raw_text.endswith("\n")
        decoded = summary.decode_tokens if summary is not None else None
        at_limit = token_limit is not None and decoded is not None and decoded >= token_limit
        text = raw_text[:-1] if eos else raw_text
        ran = bool(region) or bool(log_lines)
        out = PromptOutput(names[0], text if ran and not (failed and not text) else None,
                           (eos and not at_limit) if ran and not failed else None, list(log_lines),
                           valid=ran and not failed)
        return ParsedOutput([out], summary, source, raw_text, True, log_lines)

    outs: list[PromptOutput] = []
    cur_text, cur_err = "", []

    def close(eos: bool | None, failed: bool) -> None:
        nonlocal cur_text, cur_err
        outs.append(PromptOutput("", None if failed and not cur_text else cur_text, None if failed else eos,
                                 cur_err, valid=not failed))
        cur_text, cur_err = "", []

    for kind, s in pieces:
        if kind == "log":
            cur_err.append(s)
            if _PROMPT_END.search(s):
                close(None, True)
            continue
        parts = s.split("\n")
        for part in parts[:-1]:
            cur_text += part
            close(True, False)
        cur_text += parts[-1]
    if cur_text or cur_err:
        close(False, False)  # stopped at the token limit: no newline

    # After the first failure every later prompt of the process is poisoned.
    poisoned = False
    for o in outs:
        if poisoned:
            o.valid = False
        if not o.valid:
            poisoned = True

    exact = names is None or len(outs) == len(names)
    if names is not None:
        if len(outs) < len(names) and outs and not outs[-1].valid:
            # The run stopped (rc 255) or later prompts printed nothing: not run.
            outs += [PromptOutput("", None, None, [], valid=False) for _ in range(len(names) - len(outs))]
            exact = True
        if len(outs) != len(names):
            outs = [PromptOutput(n, None, None, [], valid=False) for n in names]
        for o, n in zip(outs, names):
            o.prompt = n
    return ParsedOutput(outs, summary, source, raw_text, exact, log_lines)


@dataclass
class ProcessRun:
    """One llm_demo process."""

    argv: list[str]
    prompts: list[str]
    stdout: str
    stderr: str
    logcat: str | None  # raw logcat slice; None when the device has no logcat
    exit_code: int | None
    timed_out: bool
    wall_s: float
    parsed: ParsedOutput
    classification: Classification
    run_dir: str = ""

    @property
    def signal(self) -> int | None:
        return signal_of(self.exit_code)

    def to_json(self) -> dict[str, Any]:
        return result_json(self.parsed, self.classification, exit_code=self.exit_code, wall_s=self.wall_s,
                           timed_out=self.timed_out)


@dataclass
class LlmDemoResult:
    runs: list[ProcessRun]
    prompts: list[PromptOutput]

    @property
    def texts(self) -> list[str | None]:
        return [p.text for p in self.prompts]

    @property
    def failure_class(self) -> str:
        sigs = load_signatures()
        return sigs.worst(r.classification.cls for r in self.runs) if self.runs else "ok"

    @property
    def ok(self) -> bool:
        return self.failure_class == "ok"

    @property
    def errors(self) -> list[str]:
        return [e for r in self.runs for e in r.classification.errors]

    @property
    def signature_ids(self) -> list[str]:
        out: list[str] = []
        for r in self.runs:
            out += [s for s in r.classification.signature_ids if s not in out]
        return out

    @property
    def summaries(self) -> list[Summary | None]:
        return [r.parsed.summary for r in self.runs]

    @property
    def summary(self) -> Summary | None:
        """The run's summary (one process), or the sums over processes (speeds recomputed)."""
        found = [s for s in self.summaries if s is not None]
        if len(self.runs) == 1 or not found:
            return found[0] if found else None
        return combine_summaries(found)

    @property
    def wall_s(self) -> float:
        return sum(r.wall_s for r in self.runs)

    def to_json(self) -> dict[str, Any]:
        s = self.summary
        return {
            "class": self.failure_class,
            "texts": self.texts,
            "summary": s.to_json() if s else None,
            "summary_nonfinite": s.nonfinite() if s else {},
            "errors": self.errors,
            "signatures": self.signature_ids,
            "prompts": [p.to_json() for p in self.prompts],
            "runs": [r.to_json() for r in self.runs],
            "wall_s": round(self.wall_s, 3),
        }


_SUMMED = ("prompt_tokens", "decode_tokens", "prefill_time_s", "decode_time_s", "sample_time_s",
           "vision_time_s", "pixels_mp")


def combine_summaries(summaries: Sequence[Summary]) -> Summary:
    out = Summary(complete=all(s.complete for s in summaries))
    for key in _SUMMED:
        vals = [s.values[key] for s in summaries if key in s.values]
        if vals:
            out.values[key] = sum(vals)
            out.raw[key] = str(out.values[key])
    for speed, count, span in (("prefill_speed_tok_s", "prompt_tokens", "prefill_time_s"),
                               ("decode_speed_tok_s", "decode_tokens", "decode_time_s")):
        if count in out.values and span in out.values:
            t = out.values[span]
            out.values[speed] = out.values[count] / t if t else float("nan")
            out.raw[speed] = str(out.values[speed])
    return out


def result_json(parsed: ParsedOutput, cls: Classification, *, exit_code: int | None = None,
                wall_s: float | None = None, timed_out: bool = False) -> dict[str, Any]:
    sig = signal_of(exit_code)
    s = parsed.summary
    return {
        "class": cls.cls,
        "texts": parsed.texts,
        "summary": s.to_json() if s else None,
        "summary_nonfinite": s.nonfinite() if s else {},
        "summary_source": parsed.summary_source,
        "errors": cls.errors,
        "signature": cls.primary.signature.id if cls.primary else None,
        "signatures": cls.signature_ids,
        "reason": cls.reason,
        "hint": cls.hint,
        "stopped_on_eos": [p.stopped_on_eos for p in parsed.prompts],
        "valid": [p.valid for p in parsed.prompts],
        "split_exact": parsed.split_exact,
        "exit_code": exit_code,
        "signal": signal_name(sig) if sig else None,
        "timed_out": timed_out,
        "wall_s": None if wall_s is None else round(wall_s, 3),
    }


def analyse(stdout: str, stderr: str = "", *, exit_code: int | None = 0, logcat: str | None = None,
            prompts: Sequence[str] | int | None = None, timed_out: bool = False,
            transport_error: str | None = None, signatures: SignatureSet | None = None,
            logcat_tags: Sequence[str] = (LOGCAT_TAG,), token_limit: int | None = None,
            ) -> tuple[ParsedOutput, Classification]:
    """Parse and classify one captured run (what the CLI and the runner both use)."""
    sigs = signatures or load_signatures()
    messages = logcat_messages(logcat, logcat_tags) if logcat else []
    parsed = parse_output(stdout, prompts, messages, token_limit=token_limit)
    ran_prompts = "prompt file is " in stdout
    cls = sigs.classify(stdout=stdout, stderr=stderr, logcat=messages, exit_code=exit_code, timed_out=timed_out,
                        transport_error=transport_error, expect_summary=ran_prompts,
                        summary_found=parsed.summary is not None)
    return parsed, cls


# ---- running on a device ----------------------------------------------------------------------
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

    def config_for(self, backend: str) -> str:
        """Config file name for a backend pair (as provisioning named them) or a file name."""
        if backend in self.model.configs:
            return self.model.configs[backend]
        if backend.endswith(".json"):
            return backend
        have = ", ".join(sorted(self.model.configs)) or "none"
        raise HarnessError(f"{self.model.device}: model {self.model.remote_dir} has no config for backend "
                           f"{backend!r} (have: {have}); pick one of them or pass a config file name")

    def run(self, prompts: Sequence[Prompt | str], *, backend: str = "qnn", overlay: Overlay | None = None,
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
            return self._transport_failure(items, str(exc))
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
            transport_error = str(exc)
        parsed, cls = analyse(stdout, stderr, exit_code=None if transport_error else exit_code, logcat=logcat_text,
                              prompts=texts, timed_out=timed_out, transport_error=transport_error,
                              signatures=self.signatures, logcat_tags=self.logcat_tags, token_limit=token_limit)
        run = ProcessRun(argv, texts, stdout, stderr, logcat_text, exit_code, timed_out, wall, parsed, cls, run_dir)
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

    def _transport_failure(self, items: list[Prompt], message: str) -> LlmDemoResult:
        texts = [p.text for p in items]
        parsed, cls = analyse("", "", exit_code=None, prompts=texts, transport_error=message,
                              signatures=self.signatures)
        run = ProcessRun([], texts, "", "", None, None, False, 0.0, parsed, cls)
        return LlmDemoResult([run], parsed.prompts)


# ---- CLI ----------------------------------------------------------------------------------------
def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise HarnessError(f"cannot read {what} file {path}: {exc.strerror}; pass an existing file") from None


def _named_file(stdout: str, label: str, base: Path) -> Path | None:
    """The file a run names in its stdout (`prompt file is X`, `config path is X`), looked up
    as printed, then beside the stdout file (a kept run folder holds prompts.txt there)."""
    m = None
    for m in re.finditer(rf"^{label} (.+)$", stdout, re.M):
        pass
    if m is None:
        return None
    named = Path(m.group(1).strip())
    for p in ([named] if named.is_absolute() else [named, base / named, base / named.name]):
        if p.is_file():
            return p
    return None


def prompt_count_of_run(stdout: str, base: Path) -> int | None:
    """How many prompts the run read from its prompt file; None when the file is not here."""
    path = _named_file(stdout, "prompt file is", base)
    if path is None:
        return None
    try:
        return count_prompt_lines(path.read_text(encoding="utf-8", errors="replace")) or None
    except OSError:
        return None


def token_limit_of_run(stdout: str, base: Path) -> int | None:
    """max_new_tokens of the config the run names (MNN's default 512 when it sets none)."""
    path = _named_file(stdout, "config path is", base)
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS) if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m harness.runners.llm_demo",
        description="Parse a captured llm_demo run and print one JSON object (class, texts, summary, errors). "
                    "Non-finite summary values (nan, -nan, inf) are null; their printed text is in summary_nonfinite.")
    ap.add_argument("stdout", help="file with llm_demo's stdout")
    ap.add_argument("--stderr", help="file with its stderr")
    ap.add_argument("--exit-code", type=int, default=0, help="exit code (128+N or -N for signal N)")
    ap.add_argument("--logcat", help="file with `logcat -d -v threadtime` output of the run")
    ap.add_argument("--prompts", type=int, help="number of prompts in the prompt file (default: read the prompt "
                    "file the run names, `prompt file is ...`, beside the stdout file or from the cwd)")
    ap.add_argument("--max-tokens", type=int, help="the run's decode limit (default: max_token_number is unknown "
                    "here, so max_new_tokens of the config the run names, 512 when it sets none)")
    args = ap.parse_args(argv)
    try:
        stdout = _read(args.stdout, "stdout")
        stderr = _read(args.stderr, "stderr") if args.stderr else ""
        logcat = _read(args.logcat, "logcat") if args.logcat else None
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    base = Path(args.stdout).resolve().parent
    prompts = args.prompts if args.prompts is not None else prompt_count_of_run(stdout, base)
    limit = args.max_tokens if args.max_tokens is not None else token_limit_of_run(stdout, base)
    parsed, cls = analyse(stdout, stderr, exit_code=args.exit_code, logcat=logcat, prompts=prompts,
                          token_limit=limit)
    print(json.dumps(result_json(parsed, cls, exit_code=args.exit_code), ensure_ascii=False, allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
