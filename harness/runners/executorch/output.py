"""What ExecuTorch's LLM runner prints, read back (docs/executorch-runner.md#the-real-runners-output).

stdout: per prompt the text (prompt echoed) and one `PyTorchObserver {json}` line. stderr: log
lines `[file.cpp:N] message` (no level or time prefix) and, per prompt, the 7-line summary from
`[stats.h:175]` on. Facts the judgement relies on, seen on the real runner:

- `generated_tokens` is one less than the tokens produced (the first token comes out of the
  prefill and is not counted): 30 produced -> 29, 1 -> 0;
- `*_token_per_sec` is absent when its span is 0 ms (all times are whole milliseconds);
- `model_execution_start_ms`/`_end_ms` span the last model call only, not the inference;
- `prompt_tokens` is the tokenizer's exact count, the `num_prompt_tokens` of the runner's
  `Max new tokens resolved: N, given pos_ P, num_prompt_tokens Q, max_context_len C` line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_OBSERVER = re.compile(r"^PyTorchObserver (\{.*\})\s*$", re.M)
LOG_LINE = re.compile(r"^\[(?P<file>[\w.+-]+):(?P<line>\d+)\] ?(?P<msg>.*)$")
_MAX_NEW = re.compile(r"Max new tokens resolved: (\d+), given pos_ (\d+), num_prompt_tokens (\d+), max_context_len (\d+)")
_SUMMARY_HEAD = re.compile(r"^\s*Prompt Tokens: (\d+)\s+Generated Tokens: (\d+)")
STATS_FILE = "stats.h"
SUMMARY_LINES = 7


@dataclass(frozen=True)
class LogLine:
    file: str
    line: int
    message: str


def parse_log(stderr: str) -> tuple[list[LogLine], list[str]]:
    """(the runner's `[file:N] message` lines, every other stderr line)."""
    logs: list[LogLine] = []
    other: list[str] = []
    for raw in stderr.splitlines():
        m = LOG_LINE.match(raw)
        if m:
            logs.append(LogLine(m["file"], int(m["line"]), m["msg"]))
        elif raw.strip():
            other.append(raw)
    return logs, other


def parse_observers(stdout: str) -> list[dict[str, Any]]:
    """Every `PyTorchObserver {...}` stats object on stdout, in order (broken JSON skipped)."""
    out = []
    for text in _OBSERVER.findall(stdout):
        try:
            data = json.loads(text)
        except ValueError:
            continue
        if isinstance(data, dict):
            out.append(data)
    return out


def parse_observer(stdout: str) -> dict[str, Any] | None:
    """The last stats object (None when absent or broken)."""
    found = parse_observers(stdout)
    return found[-1] if found else None


def texts(stdout: str) -> list[str]:
    """The text each prompt printed (what comes before its `PyTorchObserver` line)."""
    out, start = [], 0
    for m in _OBSERVER.finditer(stdout):
        out.append(stdout[start:m.start()].rstrip("\n"))
        start = m.end() + 1
    return out


_SUMMARY_ROWS = {
    "Model Load Time": "load_s", "Total inference time": "inference_s", "Prompt evaluation": "prefill_s",
    "Time to first generated token": "ttft_s",
}


def parse_summaries(logs: list[LogLine]) -> list[dict[str, Any]]:
    """The `[stats.h:...]` summaries, one per prompt: counts, seconds and rates, `lines` read."""
    out: list[dict[str, Any]] = []
    for log in logs:
        if log.file != STATS_FILE:
            continue
        head = _SUMMARY_HEAD.match(log.message)
        if head:
            out.append({"prompt_tokens": int(head[1]), "generated_tokens": int(head[2]), "lines": 1})
            continue
        if not out:
            continue
        cur = out[-1]
        cur["lines"] += 1
        msg = log.message.strip()
        secs = re.search(r"([\d.]+) \(seconds\)", msg)
        rate = re.search(r"Rate: \s*([\d.]+) \(tokens/second\)", msg)
        gen = re.match(r"Generated (\d+) tokens:", msg)
        samp = re.match(r"Sampling time over (\d+) tokens:", msg)
        key = next((v for k, v in _SUMMARY_ROWS.items() if msg.startswith(k)), None)
        if gen:
            key = "decode_s"
        elif samp:
            key, cur["sampled_tokens"] = "sampling_s", int(samp[1])
        if key and secs:
            cur[key] = float(secs[1])
            if rate:
                cur[key.replace("_s", "_rate")] = float(rate[1])
    return out


def resolved_limits(logs: list[LogLine]) -> list[dict[str, int]]:
    """The runner's `Max new tokens resolved: ...` lines, one per prompt."""
    out = []
    for log in logs:
        m = _MAX_NEW.search(log.message)
        if m:
            out.append({"max_new_tokens": int(m[1]), "pos": int(m[2]), "num_prompt_tokens": int(m[3]),
                        "max_context_len": int(m[4])})
    return out


def observer_metrics(stats: Mapping[str, Any]) -> dict[str, Any]:
    """Derived numbers in seconds and tokens per second (the runner's fields are in ms).
    `produced_tokens` counts the first token too; `decode_tok_s` is None when the runner left
    it out (0 ms span); `last_call_s` is one model call, not the decode."""
    scale = float(stats.get("SCALING_FACTOR_UNITS_PER_SECOND", 1000) or 1000)

    def span(a: str, b: str) -> float | None:
        if a in stats and b in stats:
            return (float(stats[b]) - float(stats[a])) / scale
        return None

    generated = stats.get("generated_tokens")
    return {
        "load_s": span("model_load_start_ms", "model_load_end_ms"),
        "inference_s": span("inference_start_ms", "inference_end_ms"),
        "ttft_s": span("inference_start_ms", "first_token_ms"),
        "prefill_s": span("inference_start_ms", "prompt_eval_end_ms"),
        "decode_s": span("prompt_eval_end_ms", "inference_end_ms"),
        "last_call_s": span("model_execution_start_ms", "model_execution_end_ms"),
        "prompt_tokens": stats.get("prompt_tokens"),
        "generated_tokens": generated,
        "produced_tokens": generated + 1 if isinstance(generated, int) else None,
        "prefill_tok_s": stats.get("prefill_token_per_sec"),
        "decode_tok_s": stats.get("decode_token_per_sec"),
    }


@dataclass
class RunOutput:
    """One captured run of the LLM runner, parsed, with what does not add up in `problems`."""

    observers: list[dict[str, Any]]
    summaries: list[dict[str, Any]]
    limits: list[dict[str, int]]
    texts: list[str]
    log: list[LogLine]
    other_stderr: list[str]
    problems: list[str] = field(default_factory=list)

    @property
    def stats(self) -> dict[str, Any] | None:
        return self.observers[-1] if self.observers else None

    def to_json(self) -> dict[str, object]:
        return {"stats": self.stats, "runs": [{"stats": o, "metrics": observer_metrics(o)} for o in self.observers],
                "summaries": self.summaries, "limits": self.limits, "texts": self.texts,
                "log_lines": len(self.log), "other_stderr": self.other_stderr, "problems": self.problems}


def _check(o: Mapping[str, Any], i: int, summaries: list[dict[str, Any]], limits: list[dict[str, int]]) -> list[str]:
    where = f"prompt {i + 1}"
    out = []
    gen, prompt = o.get("generated_tokens"), o.get("prompt_tokens")
    if not isinstance(gen, int) or not isinstance(prompt, int):
        return [f"{where}: PyTorchObserver without integer prompt_tokens/generated_tokens"]
    if i < len(summaries):
        s = summaries[i]
        if (s["prompt_tokens"], s["generated_tokens"]) != (prompt, gen):
            out.append(f"{where}: stats summary says {s['prompt_tokens']} prompt / {s['generated_tokens']} generated "
                       f"tokens, PyTorchObserver {prompt} / {gen}")
        if s["lines"] != SUMMARY_LINES:
            out.append(f"{where}: stats summary has {s['lines']} lines, the runner prints {SUMMARY_LINES}")
    if i < len(limits):
        lim = limits[i]
        if lim["num_prompt_tokens"] != prompt:
            out.append(f"{where}: prompt_tokens {prompt} is not the runner's num_prompt_tokens {lim['num_prompt_tokens']}")
        if gen + 1 > lim["max_new_tokens"]:
            out.append(f"{where}: {gen + 1} tokens produced (generated_tokens {gen} + the prefill's) over the "
                       f"resolved limit {lim['max_new_tokens']}")
    m = observer_metrics(o)
    for key, span in (("decode_token_per_sec", m["decode_s"]), ("prefill_token_per_sec", m["prefill_s"])):
        if span is not None and (span > 0) != (key in o):
            out.append(f"{where}: {key} {'missing' if span > 0 else 'present'} with a {span * 1000:.0f} ms span")
    if m["last_call_s"] is not None and m["inference_s"] is not None and m["last_call_s"] > m["inference_s"]:
        out.append(f"{where}: the last model call ({m['last_call_s']} s) is longer than the whole inference")
    if o.get("model_execution_end_ms", 0) > o.get("inference_end_ms", float("inf")):
        out.append(f"{where}: model_execution_end_ms after inference_end_ms")
    return out


def parse_run(stdout: str, stderr: str) -> RunOutput:
    logs, other = parse_log(stderr)
    run = RunOutput(parse_observers(stdout), parse_summaries(logs), resolved_limits(logs), texts(stdout), logs, other)
    if run.observers and len(run.summaries) != len(run.observers):
        run.problems.append(f"{len(run.observers)} PyTorchObserver lines but {len(run.summaries)} stats summaries")
    for i, o in enumerate(run.observers):
        run.problems += _check(o, i, run.summaries, run.limits)
    return run
