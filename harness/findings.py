"""A finding: one thing a check saw, in one shape for every check (compiled shapes, activation
quantization, mRoPE positions, text coherence). Each domain names its findings with its own kind
enum (checks/shapes, checks/quant, checks/mrope, checks/coherence); the severity, where it is,
what was expected and found, what to do and where the evidence came from are spelled here
once, and so is the text a person reads (`explain`).

Bottom floor: imports nothing of the harness, so every check can use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from enum import StrEnum


class Severity(StrEnum):
    ERROR = "error"  # fails the check
    WARNING = "warning"  # said, never a failure


@dataclass(frozen=True)
class Where:
    """Where a finding is, in its domain's terms; every part is optional."""

    file: str = ""  # the file (a config, a graph, a log named by its source)
    key: str = ""  # the key, tensor or matched text in it
    line_no: int | None = None  # the line of a log or dump
    tensor: str | None = None  # a graph tensor
    layer: int | None = None  # a decoder layer
    run: int | None = None  # a prompt run in a [POSDBG] dump
    chunk: int | None = None  # a prefill chunk of that run
    decode_step: int | None = None
    all_seq_len: int | None = None
    seq_len: int | None = None
    axis: int | None = None  # a position axis (t, h, w)
    index: int | None = None  # a token index

    def describe(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file + (f" line {self.line_no}" if self.line_no is not None else ""))
        if self.key:
            parts.append(self.key)
        if self.run is not None:
            run = f"run {self.run}"
            if self.chunk is not None:
                run += f", prefill chunk {self.chunk}"
            if self.decode_step is not None:
                run += f", decode step {self.decode_step}"
            if self.all_seq_len is not None:
                run += f" (all_seq_len={self.all_seq_len}, seq_len={self.seq_len})"
            if self.line_no and not self.file:
                run += f", log line {self.line_no}"
            parts.append(run)
        if self.layer is not None:
            parts.append(f"layer {self.layer}")
        if self.tensor:
            parts.append(self.tensor)
        return ": ".join(parts)

    def to_json(self) -> dict[str, object]:
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) not in (None, "")}


@dataclass(frozen=True)
class Finding:
    kind: StrEnum  # the domain's own kind (ShapeKind, QuantKind, PositionKind, CoherenceKind)
    message: str = ""  # what was seen, in words ("" : the expected/found pair says it)
    severity: Severity = Severity.ERROR
    where: Where = field(default_factory=Where)
    expected: object = None  # a shape, a position, a count: the evidence as its domain holds it
    found: object = None
    hint: str = ""  # what to do
    source: str = ""  # where the evidence came from (stub, libQnnSystem, qnn-context-binary-utility, sidecar, ...)

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def explain(self, *, with_hint: bool = True) -> str:
        tag = self.kind.value if self.is_error else f"{self.kind.value}, {self.severity.value}"
        what = self.message
        if not what and self.expected is not None:
            what = f"expected {self.expected}, found {self.found}"
        where = self.where.describe()
        text = f"[{tag}] " + ": ".join(p for p in (where, what) if p)
        if self.source:
            text += f" (from {self.source})"
        if with_hint and self.hint:
            text += f"\n    what to do: {self.hint}"
        return text

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.kind.value, "severity": self.severity.value, **self.where.to_json()}
        for key in ("message", "hint", "source"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        for key in ("expected", "found"):
            value = getattr(self, key)
            if value is not None:
                out[key] = list(value) if isinstance(value, tuple) else value
        out["explain"] = self.explain(with_hint=False)
        return out


def errors(findings: Iterable[Finding]) -> list[Finding]:
    """The findings that fail their check."""
    return [f for f in findings if f.is_error]


__all__ = ["Finding", "Severity", "Where", "errors"]
