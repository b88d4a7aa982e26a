"""Is a generated text coherent or garbled? (English and Chinese)

`judge(text, prompt=, reference=, expect_any=)` measures the text (textstats), then
applies rules. Two kinds of rules:

- decisive: one is enough (empty text, control characters, U+FFFD, token soup,
  a repetition loop, an answer sharing nothing with both the prompt and the reference);
- suspicious: each adds a weight; garbled when the weights reach 1.0 (off-topic,
  invented words, mangled tokens, fragment lines, a long repeated passage...).
  The activation-saturation fault writes fluent text that drifts off-topic and
  mangles a word here and there: no single sign is sure, together they are.

A text cut mid-sentence is not garbled by itself (runs stop at max tokens), so the
end of the text is never held against it. Thresholds live in `Thresholds`,
calibrated on ../shared/corpus/coherence-dev.jsonl with cross-validation by prompt
(benchmarks/coherence_eval.py).

CLI: `python -m harness.checks.coherence FILE.jsonl [--json]`."""

from harness.checks.coherence.cli import main
from harness.checks.coherence.measure import Measurements, measure
from harness.checks.coherence.rows import Row, RowsError, Tally, load_rows
from harness.checks.coherence.rules import assert_coherent, decide, judge
from harness.checks.coherence.verdict import CoherenceKind, TextVerdict, Thresholds, VerdictLabel

__all__ = ["CoherenceKind", "Measurements", "Row", "RowsError", "Tally", "TextVerdict", "Thresholds", "VerdictLabel", "assert_coherent",
           "decide", "judge", "load_rows", "main", "measure"]
