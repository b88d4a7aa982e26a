"""A shape finding: where (file, key/tensor), expected vs found, what to do, and from which
source the compiled IO came; the assertion that reports them all."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class ShapeFinding:
    """One problem: where (file, key/tensor), expected vs found, and what to do."""

    kind: str
    file: str
    key: str
    expected: str
    found: str
    hint: str
    severity: str = ERROR
    line_no: int | None = None
    source: str = ""  # where the compiled IO came from: stub, libQnnSystem, qnn-context-binary-utility, sidecar

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def explain(self) -> str:
        if self.line_no is not None:  # a log line: the matched text says it all
            text = f"[{self.severity}] {self.kind}: {self.file} line {self.line_no}: {self.key}"
        else:
            text = (f"[{self.severity}] {self.kind}: {self.file}: {self.key}: "
                    f"expected {self.expected}, found {self.found}")
        if self.source:
            text += f" (from {self.source})"
        if self.hint:
            text += f"\n    what to do: {self.hint}"
        return text


def assert_shapes_ok(findings: Iterable[ShapeFinding], *, allow_warnings: bool = True) -> None:
    """Raise AssertionError explaining every error (and warning) finding."""
    findings = list(findings)
    bad = [f for f in findings if f.severity == ERROR or not allow_warnings]
    if not bad:
        return
    lines = [f"shape check failed: {len(bad)} problem(s)"]
    lines += [f.explain() for f in findings]
    raise AssertionError("\n".join(lines))


__all__ = ["ERROR", "WARNING", "ShapeFinding", "assert_shapes_ok"]
