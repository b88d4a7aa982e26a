"""The performance summary block `llm_demo` prints at the end of `benchmark()`.

Format (docs/llm-demo-output.md#summary): a line of 33 `#`, `label = value unit` lines (some with leading
spaces), a line of 34 `#`. Numbers are printf `%d`/`%.2f`/`%.3f`, so non-finite values
appear as `nan`, `-nan` (glibc) or `inf`; all of them parse here to Python floats.
The token counts and times are sums over every prompt of the process.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

OPEN_LINE = "#" * 33
CLOSE_LINE = "#" * 34

# label as printed -> (field name, int?)
_FIELDS: dict[str, tuple[str, bool]] = {
    "prompt tokens num": ("prompt_tokens", True),
    "decode tokens num": ("decode_tokens", True),
    "vision time": ("vision_time_s", False),
    "pixels_mp": ("pixels_mp", False),
    "audio process time": ("audio_process_time_s", False),
    "audio input time": ("audio_input_time_s", False),
    "prefill time": ("prefill_time_s", False),
    "decode time": ("decode_time_s", False),
    "sample time": ("sample_time_s", False),
    "prefill speed": ("prefill_speed_tok_s", False),
    "decode speed": ("decode_speed_tok_s", False),
    "vision speed": ("vision_speed_mp_s", False),
    "audio RTF": ("audio_rtf", False),
    "audio E2E time": ("audio_e2e_time_s", False),  # MNN after 3.6.1, audio input only
    "audio E2E RTF": ("audio_e2e_rtf", False),
}
FIELD_NAMES: tuple[str, ...] = tuple(name for name, _ in _FIELDS.values())

_NUMBER = r"[-+]?(?:nan|inf(?:inity)?|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
_LINE_RE = re.compile(
    r"^\s*(?P<label>" + "|".join(re.escape(k) for k in sorted(_FIELDS, key=len, reverse=True)) + r")"
    r"\s*=\s*(?P<value>" + _NUMBER + r")(?:\s+\S+)?\s*$",
    re.IGNORECASE,
)
_LABELS = {k.lower(): v for k, v in _FIELDS.items()}


def parse_number(text: str) -> float:
    """printf output to float: `-nan`/`nan` -> nan, `inf`/`-inf` -> +-inf."""
    t = text.strip().lower()
    if t.lstrip("+-") == "nan":
        return math.nan
    return float(t)


@dataclass
class Summary:
    """Parsed block. `values` holds ints for token counts and floats (maybe nan/inf) otherwise;
    `raw` keeps the printed text of each value. `start`/`end` are character offsets of the
    block in the text it was found in (start = the newline MNN prints before the opening
    line, when present), so callers can cut the generated text before it."""

    values: dict[str, float | int] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)
    complete: bool = False  # the closing line was seen
    start: int = 0
    end: int = 0
    unknown_lines: list[str] = field(default_factory=list)

    def get(self, name: str) -> float | int | None:
        return self.values.get(name)

    @property
    def prompt_tokens(self) -> int | None:
        v = self.values.get("prompt_tokens")
        return int(v) if v is not None else None

    @property
    def decode_tokens(self) -> int | None:
        v = self.values.get("decode_tokens")
        return int(v) if v is not None else None

    def nonfinite(self) -> dict[str, str]:
        """Fields whose value is nan or inf, with the text printed for them."""
        return {k: self.raw[k] for k, v in self.values.items() if isinstance(v, float) and not math.isfinite(v)}

    def to_json(self) -> dict[str, float | int | None]:
        """Strict-JSON form: nan and inf become null (see `nonfinite()` for what was printed)."""
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.values.items()}


def _line_spans(text: str) -> Iterator[tuple[int, str]]:
    pos = 0
    for line in text.splitlines(keepends=True):
        yield pos, line.rstrip("\r\n")
        pos += len(line)


def find_summary(text: str, *, last: bool = True) -> Summary | None:
    """The summary block in `text` (the last one by default; a process prints one)."""
    blocks = find_summaries(text)
    if not blocks:
        return None
    return blocks[-1] if last else blocks[0]


def find_summaries(text: str) -> list[Summary]:
    found: list[Summary] = []
    current: Summary | None = None
    for pos, line in _line_spans(text):
        stripped = line.strip()
        if stripped == OPEN_LINE:
            current = Summary()
            # MNN prints "\n####...": the newline before the opening line belongs to the block.
            current.start = pos - 1 if pos > 0 and text[pos - 1] == "\n" else pos
            current.end = pos + len(line)
            found.append(current)
            continue
        if current is None or current.complete:
            continue
        if stripped == CLOSE_LINE:
            current.complete = True
            end = pos + len(line)
            if text[end:end + 1] == "\r":
                end += 1
            if text[end:end + 1] == "\n":
                end += 1
            current.end = end
            continue
        m = _LINE_RE.match(line)
        if m:
            name, is_int = _LABELS[m.group("label").lower()]
            raw = m.group("value")
            value = parse_number(raw)
            current.values[name] = int(value) if is_int and math.isfinite(value) else value
            current.raw[name] = raw
            current.end = pos + len(line) + 1
        elif stripped:
            # Anything else inside the block (interleaved log lines) is kept, not fatal.
            current.unknown_lines.append(line)
    return found


def parse_summary_lines(lines: list[str]) -> Summary | None:
    """Same, for lines that came without their text (e.g. logcat messages)."""
    return find_summary("\n".join(lines) + "\n")
