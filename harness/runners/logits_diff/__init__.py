"""Teacher-forced logits comparison with MNN's `llm_logits_diff`: run it on a device, parse
every row and both summary lines, and give a verdict (docs/logits-diff.md).

    llm_logits_diff configA.json configB.json prompt.txt [max_tokens]

A's greedy token drives both models, so every step compares the logits of A and B for the
same history. The row and summary formats, what the real binary printed on this machine, and
where each threshold comes from are written down in docs/logits-diff.md.

One job per module, as runners/llm_demo/: parse.py (the captured stdout -> rows, summary lines,
error lines), judge.py (Thresholds, DiffResult, judge, analyse), runner.py (LogitsDiffRunner: the
device run), cli.py (`python -m harness.runners.logits_diff`).

The verdict (`judge`, an Agreement): `agree`, `drift` or `disagree` from the argmax agreement of the counted
steps, the mean KL(A||B) and the NLL gap (B - A); `error` when no step was compared, B's
forward returned nothing, the summary is missing or the tool failed. Step 0 is not counted
when the prompt is longer than either config's prefill chunk: `forward(ids)` then returns
other logits than the last prompt token's (observed with the real binary; generation is
unaffected), and the mean KL/NLL, which include step 0, are then not used for the verdict.

CLI: `python -m harness.runners.logits_diff STDOUT [--stderr F] [--exit-code N] [--json]
[--chunk-a N --chunk-b N]`; with --json one object: steps, disagreements, first_disagreement
(null when none), mean_kl, nll_a, nll_b, worst_max_abs_diff, verdict, reasons, ...
"""

from harness.runners.logits_diff.cli import main
from harness.runners.logits_diff.judge import VERDICTS, Agreement, DiffResult, analyse, chunk_of, judge
from harness.runners.logits_diff.parse import ParsedDiff, Step, add_stderr, json_number, parse
from harness.runners.logits_diff.runner import PROMPT_FILE, LogitsDiffRunner

__all__ = ["PROMPT_FILE", "VERDICTS", "DiffResult", "LogitsDiffRunner", "ParsedDiff",
           "Step", "Agreement", "add_stderr", "analyse", "chunk_of", "judge", "json_number", "main",
           "parse"]
