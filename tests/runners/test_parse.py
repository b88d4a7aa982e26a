"""Parsing llm_demo output: the summary block, per-prompt text, the CLI, on the real output
quoted in the reference (mnn-llm.md §1) and on variants built from the documented rules."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runners import find_summary, parse_number
from harness.runners.llm_demo import analyse, parse_output

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / ".." / "shared"
FIXTURES = REPO / "fixtures" / "llm_demo"
REAL = FIXTURES / "reference_p2_greedy.stdout"

HEAD = ("config path is model/config.json\nmain, 276, cost time: 6.641000 ms\nPrepare for tuning opt Begin\n"
        "Prepare for tuning opt End\nmain, 284, cost time: 0.580000 ms\nprompt file is p.txt\n")


def block(prompt=6, decode=5, prefill_speed="130434.78", decode_speed="147058.83", rtf="-nan", decode_time="0.00"):
    return ("\n#################################\n"
            f"prompt tokens num = {prompt}\ndecode tokens num = {decode}\n vision time = 0.00 s\n"
            " pixels_mp = 0.00 MP\n  audio process time = 0.00 s\n  audio input time = 0.00 s\n"
            f"prefill time = 0.00 s\n decode time = {decode_time} s\n sample time = 0.00 s\n"
            f"prefill speed = {prefill_speed} tok/s\n decode speed = {decode_speed} tok/s\n"
            f" vision speed = 0.000 MP/s\n audio RTF = {rtf} \n##################################\n")


def test_fixture_is_the_reference_output_byte_for_byte():
    ref = SHARED / "reference" / "mnn-llm.md"
    if not ref.is_file():
        pytest.skip(f"{ref} is absent (the shared reference folder is not mounted)")
    text = ref.read_text(encoding="utf-8")
    start = text.index("```\n", text.index("### Real llm_demo stdout")) + 4
    quoted = text[start:text.index("```\n", start)]
    assert (FIXTURES / "reference_p2_greedy.quoted.txt").read_text(encoding="utf-8") == quoted
    # The reference annotates lines with "   <- ..."; the device printed them without.
    stripped = "".join(re.sub(r"\s+<- .*$", "", ln) + "\n" for ln in quoted.splitlines())
    assert REAL.read_bytes() == stripped.encode()


def test_real_output_summary_and_texts():
    stdout = REAL.read_text(encoding="utf-8")
    s = find_summary(stdout)
    assert s is not None and s.complete
    assert s.prompt_tokens == 6 and s.decode_tokens == 5
    assert s.values["prefill_speed_tok_s"] == 130434.78
    assert s.values["decode_speed_tok_s"] == 147058.83
    assert s.values["vision_speed_mp_s"] == 0.0
    assert math.isnan(s.values["audio_rtf"]) and s.raw["audio_rtf"] == "-nan"
    assert s.nonfinite() == {"audio_rtf": "-nan"}
    assert s.to_json()["audio_rtf"] is None
    parsed = parse_output(stdout, ["say hi", "say nothing"])
    assert parsed.texts == ["Hi!", ""]  # prompt 2 hit EOS at once: only the newline
    assert [p.stopped_on_eos for p in parsed.prompts] == [True, True]
    assert parsed.split_exact and parsed.summary_source == "stdout"
    _, cls = analyse(stdout, prompts=2)
    assert cls.cls == "ok" and cls.errors == []


@pytest.mark.parametrize("text,expect", [("nan", "nan"), ("-nan", "nan"), ("inf", math.inf), ("-inf", -math.inf),
                                         ("130434.78", 130434.78), ("0.000", 0.0)])
def test_parse_number(text, expect):
    v = parse_number(text)
    assert (math.isnan(v) if expect == "nan" else v == expect)


def test_prefill_only_and_zero_decode_time():
    # max_token_number 0: decode tokens 0 and " decode speed = -nan tok/s"; time 0 with tokens: inf.
    out = HEAD + block(decode=0, decode_speed="-nan") + ""
    s = find_summary(out)
    assert s.decode_tokens == 0 and math.isnan(s.values["decode_speed_tok_s"])
    out2 = HEAD + "Hi" + block(decode_speed="inf", rtf="nan")
    s2 = find_summary(out2)
    assert s2.values["decode_speed_tok_s"] == math.inf and s2.to_json()["decode_speed_tok_s"] is None
    parsed = parse_output(out2, ["p"])
    assert parsed.texts == ["Hi"] and parsed.prompts[0].stopped_on_eos is False


def test_max_tokens_glues_prompts_and_the_split_says_so():
    # With max_token_number 2 the first answer has no newline: "Hi" + next answer.
    out = HEAD + "HiHello\n" + block()
    parsed = parse_output(out, ["a", "b"])
    assert not parsed.split_exact
    assert parsed.texts == [None, None] and parsed.raw_text == "HiHello\n"
    one = parse_output(out, ["a"])  # one prompt per process is exact
    assert one.texts == ["HiHello"] and one.split_exact


def test_poisoned_later_prompts_are_invalid():
    out = (HEAD + "Paris.\nBroad cast error, dim1 = 3, dim2 = 4\nCompute Shape Error for /layers.0/Add\n"
           "code=3 in onForward, 531\n[Error]: LLM in error state. Status: 4\n"
           "[Error]: LLM in error state. Status: 4\n" + block(prompt=30, decode=3))
    parsed, cls = analyse(out, prompts=["France?", "bad", "later"])
    assert parsed.texts[0] == "Paris." and parsed.prompts[0].valid
    assert parsed.prompts[1].valid is False and parsed.prompts[1].text is None
    assert any("Compute Shape Error" in e for e in parsed.prompts[1].errors)
    assert parsed.prompts[2].valid is False and parsed.prompts[2].errors == ["[Error]: LLM in error state. Status: 4"]
    assert cls.cls == "shape-error"
    assert cls.signature_ids[:3] == ["broadcast-error", "compute-shape-error", "forward-size-error"]


def test_response_failed_stops_the_run_with_255():
    out = HEAD + "Paris.\nMNN_QNN: Failed to compute shape for Plugin Op.\nError: Response generation failed due to internal error\n"
    parsed, cls = analyse(out, exit_code=255, prompts=["a", "b", "c"])
    assert parsed.texts == ["Paris.", None, None]
    assert [p.valid for p in parsed.prompts] == [True, False, False]
    assert cls.cls == "shape-error" and cls.primary.signature.id == "qnn-plugin-shape"


def test_init_error_with_exit_0_is_not_ok():
    out = "config path is bad/config.json\n[Error]: LLM weight file not found: bad/llm.mnn.weight\nLLM init error\n"
    parsed, cls = analyse(out, exit_code=0, prompts=1)
    assert cls.cls == "init-error" and cls.primary.signature.id == "file-not-found"
    assert parsed.texts == [None]


def test_summary_from_logcat_when_stdout_has_none():
    stdout = HEAD + "Paris.\n"
    logcat = "".join(f"12-02 13:16:00.{i:03d}  4242  4242 I MNNJNI  : {line}\n"
                     for i, line in enumerate(block().split("\n")[:-1]))
    parsed, cls = analyse(stdout, logcat=logcat, prompts=["France?"])
    assert parsed.summary_source == "logcat" and parsed.summary.prompt_tokens == 6
    assert parsed.texts == ["Paris."] and cls.cls == "ok"
    _, cls2 = analyse(stdout, prompts=["France?"])  # logcat-only build, no logcat captured
    assert cls2.cls == "runtime-error" and "no summary block" in cls2.reason


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.runners.llm_demo", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=60)


def test_cli_on_the_real_output_is_strict_json():
    res = _cli(str(REAL), "--prompts", "2")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert data["class"] == "ok"
    assert data["texts"] == ["Hi!", ""]
    assert data["summary"]["prompt_tokens"] == 6 and data["summary"]["audio_rtf"] is None
    assert data["summary_nonfinite"] == {"audio_rtf": "-nan"}
    assert data["errors"] == []


def test_cli_crash_and_errors(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text(HEAD + "The capital")
    err = tmp_path / "err.txt"
    err.write_text("段错误 (核心已转储)\n")
    data = json.loads(_cli(str(out), "--stderr", str(err), "--exit-code", "139").stdout)
    assert data["class"] == "crash" and data["signal"] == "SIGSEGV"
    assert data["texts"] == ["The capital"]
    assert "段错误 (核心已转储)" in data["errors"]


def test_cli_missing_file_is_a_message_not_a_traceback(tmp_path):
    res = _cli(str(tmp_path / "nope.txt"))
    assert res.returncode == 2
    assert "cannot read stdout file" in res.stderr and "Traceback" not in res.stderr


def _summary(prompt_tokens: int, decode_tokens: int) -> str:
    return ("\n#################################\n"
            f"prompt tokens num = {prompt_tokens}\ndecode tokens num = {decode_tokens}\n"
            "prefill time = 0.18 s\n decode time = 0.19 s\n##################################\n")


def test_cli_reads_the_prompt_count_from_the_run(tmp_path):
    """One prompt whose answer has line breaks: the stdout names the prompt file, so the count
    is known and the answer stays one text (no --prompts given)."""
    (tmp_path / "prompts.txt").write_text("List three colours, one per line.\n")
    out = tmp_path / "stdout.txt"
    out.write_text("config path is config.json\nprompt file is prompts.txt\nRed\nGreen\nBlue\n\n" + _summary(30, 9))
    data = json.loads(_cli(str(out)).stdout)
    assert data["texts"] == ["Red\nGreen\nBlue\n"] and data["split_exact"] is True
    assert data["stopped_on_eos"] == [True]  # config.json is not here: the limit is unknown, 9 tokens


def test_cli_stopped_on_eos_is_false_at_the_token_limit(tmp_path):
    (tmp_path / "prompts.txt").write_text("Describe a cat in two sentences.\n")
    (tmp_path / "config.json").write_text(json.dumps({"max_new_tokens": 64}))
    out = tmp_path / "stdout.txt"
    # The 64th token was a newline: the text ends in one, yet the run stopped at its limit.
    out.write_text(f"config path is {tmp_path / 'config.json'}\nprompt file is prompts.txt\n"
                   "A cat. A cat.\n" + _summary(37, 64))
    data = json.loads(_cli(str(out)).stdout)
    assert data["stopped_on_eos"] == [False]
    data = json.loads(_cli(str(out), "--max-tokens", "128").stdout)
    assert data["stopped_on_eos"] == [True]
    # Without the config, MNN's default limit (512) applies when it is named but sets none.
    (tmp_path / "config.json").write_text("{}")
    assert json.loads(_cli(str(out)).stdout)["stopped_on_eos"] == [True]
