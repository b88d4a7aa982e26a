"""JSONL rows to judge (the CLI's input) and the tally of verdicts against labels."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness.checks.surprise import Surprise
from harness.errors import HarnessError


class RowsError(Exception):
    """The JSONL file cannot be judged; the message says where and why."""


@dataclass(frozen=True)
class Row:
    line: int
    prompt: str | None
    text: str
    reference: str | None
    label: str | None
    expect_any: tuple[str, ...]
    surprise: Surprise | None = None
    system: str | None = None


def load_rows(path: Path) -> list[Row]:
    """Read a JSONL file of {prompt, text, reference?, label?, expect_any?} rows."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RowsError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RowsError(f"{path}: cannot read as UTF-8 text ({exc})") from None
    rows: list[Row] = []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RowsError(f"{path}:{n}: not valid JSON ({exc.msg}); each line must be one "
                            "JSON object") from None
        if not isinstance(obj, dict):
            raise RowsError(f"{path}:{n}: expected a JSON object with 'text', got "
                            f"{type(obj).__name__}")
        if not isinstance(obj.get("text"), str):
            raise RowsError(f"{path}:{n}: key 'text' (the generated text, a string) is missing "
                            "or not a string")
        for key in ("prompt", "reference", "label", "system"):
            if obj.get(key) is not None and not isinstance(obj[key], str):
                raise RowsError(f"{path}:{n}: key '{key}' must be a string")
        label = obj.get("label")
        if label is not None and label not in ("coherent", "garbled", "unknown"):
            raise RowsError(f"{path}:{n}: label {label!r} is not one of coherent, garbled, unknown")
        expect = obj.get("expect_any", [])
        if isinstance(expect, str):
            expect = [expect]
        if not isinstance(expect, list) or not all(isinstance(e, str) for e in expect):
            raise RowsError(f"{path}:{n}: 'expect_any' must be a list of strings")
        surprise = None
        if obj.get("surprise") is not None:
            try:
                surprise = Surprise.from_json(obj["surprise"])
            except HarnessError as exc:
                raise RowsError(f"{path}:{n}: key 'surprise': {exc}") from None
        rows.append(Row(n, obj.get("prompt"), obj["text"], obj.get("reference"), label, tuple(expect),
                        surprise, obj.get("system")))
    if not rows:
        raise RowsError(f"{path}: no rows (expected one JSON object per line)")
    return rows


@dataclass
class Tally:
    coherent: int = 0
    garbled: int = 0
    false_alarms: int = 0   # coherent called garbled
    caught: int = 0         # garbled called garbled

    def add(self, label: str | None, verdict: str) -> None:
        if label == "coherent":
            self.coherent += 1
            self.false_alarms += verdict == "garbled"
        elif label == "garbled":
            self.garbled += 1
            self.caught += verdict == "garbled"

    @property
    def scored(self) -> int:
        return self.coherent + self.garbled

    def summary(self) -> str:
        if not self.scored:
            return "no labelled rows (coherent/garbled): no accuracy to report"
        right = (self.coherent - self.false_alarms) + self.caught
        fa = self.false_alarms / self.coherent if self.coherent else 0.0
        caught = self.caught / self.garbled if self.garbled else 1.0
        return (f"labelled rows: {self.scored}  accuracy: {right / self.scored:.1%}  "
                f"false alarms: {self.false_alarms}/{self.coherent} ({fa:.1%})  "
                f"garbled caught: {self.caught}/{self.garbled} ({caught:.1%})")
