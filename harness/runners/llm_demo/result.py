"""A captured llm_demo run, parsed and classified: `analyse`, the per-process and whole-run
result types, and their JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.catalogue import signal_name, signal_of
from harness.errors import TransportError
from harness.outcomes import FailureClass
from harness.runners.llm_demo.output import ParsedOutput, PromptOutput, parse_output
from harness.runners.signatures import Classification, SignatureSet, load_signatures, logcat_messages
from harness.runners.summary import Summary

LOGCAT_TAG = "MNNJNI"


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
    fault: TransportError | None = None  # the link fault that cut the run (its class is transport-error)
    env: dict[str, str] | None = None  # the environment it ran with on the device (a repro bundle's)

    @property
    def signal(self) -> int | None:
        return signal_of(self.exit_code)

    def to_json(self) -> dict[str, object]:
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
        return sigs.worst(r.classification.cls for r in self.runs) if self.runs else FailureClass.OK.value

    @property
    def ok(self) -> bool:
        return self.failure_class == FailureClass.OK

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

    def to_json(self) -> dict[str, object]:
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
                wall_s: float | None = None, timed_out: bool = False) -> dict[str, object]:
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
    """Parse and classify one captured run (what the CLI and the runner both use, so
    `python -m harness.runners.llm_demo` and the lab give a run one verdict). A run that printed
    no answer and no summary block is a runtime error, whether or not it got as far as naming
    its prompt file: the lab calls each of its prompts one (pipeline.decide: no text)."""
    sigs = signatures or load_signatures()
    messages = logcat_messages(logcat, logcat_tags) if logcat else []
    parsed = parse_output(stdout, prompts, messages, token_limit=token_limit)
    ran_prompts = "prompt file is " in stdout
    answered = any(t is not None for t in parsed.texts)
    cls = sigs.classify(stdout=stdout, stderr=stderr, logcat=messages, exit_code=exit_code, timed_out=timed_out,
                        transport_error=transport_error, expect_summary=ran_prompts or not answered,
                        summary_found=parsed.summary is not None)
    return parsed, cls
