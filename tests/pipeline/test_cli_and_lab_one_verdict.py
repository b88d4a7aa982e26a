"""`python -m harness.runners.llm_demo` and the lab give a captured run one verdict (issue 21):
the CLI's class is the lab record's failure class (passed for ok), for the runs where they
once parted: no answer and no summary block, with or without the prompt-file line."""

from __future__ import annotations

import json

import pytest

from harness import pipeline
from harness.pairs import BackendPair
from harness.runners import Prompt, PromptCase
from harness.runners.llm_demo import LlmDemoResult, ProcessRun, analyse
from harness.runners.llm_demo.cli import main
from tests.pipeline.cellkit import cell_record

PROMPT = Prompt("What is the capital of France? Answer briefly.", id="france")
SUMMARY = ("\n#################################\nprompt tokens num = 18\ndecode tokens num = 8\n"
           "prefill time = 0.10 s\n decode time = 0.10 s\nprefill speed = 180.00 tok/s\n"
           " decode speed = 80.00 tok/s\n##################################\n")
HEAD = "config path is c.json\nprompt file is prompts.txt\n"


def _lab(stdout: str) -> str:
    """The lab's record for the run (the runner's analyse, then the generation check as the doors run it)."""
    parsed, cls = analyse(stdout, "", exit_code=0, prompts=[PROMPT.text])
    proc = ProcessRun(["llm_demo"], [PROMPT.text], stdout, "", None, 0, False, 0.2, parsed, cls)
    cpu = BackendPair.parse("cpu")
    runs = {cpu: pipeline.PairRun(cpu, LlmDemoResult([proc], parsed.prompts))}
    rec = cell_record(runs, pipeline.judge_matrix(runs, [PromptCase(PROMPT, ())])[0], device="d")
    return rec.cause


def _cli(stdout: str, tmp_path, capsys) -> str:
    path = tmp_path / "stdout.txt"
    path.write_text(stdout)
    assert main([str(path)]) == 0
    return json.loads(capsys.readouterr().out)["class"]


@pytest.mark.parametrize("stdout", [
    "",                                             # nothing at all
    "CPU Group: [ 0 1 ]\nThe device supports: i8sdot:0\n",  # load noise, then silence
    HEAD,                                           # named its files, then stopped
], ids=["empty", "load-lines-only", "prompt-file-only"])
def test_no_answer_and_no_summary_is_a_runtime_error_both_ways(stdout, tmp_path, capsys):
    assert _lab(stdout) == "runtime-error"
    assert _cli(stdout, tmp_path, capsys) == "runtime-error"


def test_an_answered_run_passes_both_ways(tmp_path, capsys):
    stdout = HEAD + "The capital of France is Paris.\n" + SUMMARY
    assert _lab(stdout) == "passed" and _cli(stdout, tmp_path, capsys) == "ok"
