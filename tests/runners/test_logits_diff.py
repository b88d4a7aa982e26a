"""llm_logits_diff: every row and both summary lines parsed from real captured runs, the verdict
and its step-0 rule, the CLI contract, a real run of the real binary on the host through the
device runner, and the virtual tool's scripted scenarios through the same runner."""

from __future__ import annotations

import json
import math
import os
import posixpath
import subprocess
import sys
from pathlib import Path

import pytest
from runner_helpers import REPO, SM8750_ENV, local_device

from harness.checks import DEFAULT_THRESHOLDS
from harness.pairs import BackendPair
from harness.provision import ProvisionedModel, ProvisionedRuntime
from harness.runners import TOOL
from harness.runners import logits_diff as ld

FIX = REPO / "fixtures" / "logits_diff"
SHARED = (REPO / ".." / "shared").resolve()
REAL_RT = SHARED / "runtimes" / "mnn-x86_64"
REAL_MODEL = SHARED / "models" / "smollm2-135m-instruct-mnn-npu16"
CAT = "Describe a cat in two sentences."


def fixture(name: str) -> str:
    return (FIX / f"{name}.stdout").read_text(encoding="utf-8")


# ---- parsing real output ------------------------------------------------------------------------
def test_identical_configs_every_row_and_both_summary_lines():
    p = ld.parse(fixture("identical"))
    assert p.prompt_tokens == 37 and p.max_new_tokens == 16 and p.has_header
    assert [s.index for s in p.steps] == list(range(16))
    first = p.steps[0]
    assert (first.tok_a, first.tok_b, first.agree, first.margin_a, first.margin_b) == (49, 49, True, 0.9191, 0.9191)
    assert first.text == "A" and p.steps[1].text == " cat" and p.steps[3].text == " depicted"
    assert all(s.max_abs_diff == 0 and s.mean_abs_diff == 0 for s in p.steps)
    assert (p.disagreements, p.first_at, p.worst_max_abs_diff) == (0, -1, 0.0)
    assert (p.mean_kl, p.nll_a, p.nll_b) == (0.0, 0.63737, 0.63737)
    res = ld.judge(p)
    assert res.verdict == "agree" and res.first_disagreement is None and res.counted_steps == 16


def test_corrupted_weights_disagree_everywhere_with_float_max_diffs():
    res = ld.analyse(fixture("corrupted-weights"))
    p = res.parsed
    assert len(p.steps) == 16 and not any(s.agree for s in p.steps)
    assert p.steps[0].max_abs_diff == pytest.approx(3.4028234663852886e38)  # FLT_MAX printed with %9.5f
    assert p.disagreements == 16 and p.first_at == 0 and p.mean_kl == pytest.approx(8.440587)
    assert res.verdict == "disagree" and res.first_disagreement == 0
    assert res.nll_gap == pytest.approx(10.8027 - 0.63737, abs=1e-4)
    assert res.context() == ("", "A", " cat is depicted as a fluffy")


def test_stop_token_line_and_special_token_text():
    p = ld.parse(fixture("other-session-france"))
    assert p.stop_step == 7 and p.steps[-1].text == "<|im_end|>" and len(p.steps) == 8
    assert "".join(s.text for s in p.steps[:7]) == "The capital of France is Paris."


@pytest.mark.parametrize("name,verdict", [
    ("identical", "agree"),
    ("other-session-cat", "agree"),          # a second CPU session: differs a little, KL 0.013
    ("other-session-france", "agree"),       # KL 0.017
    ("one-token-chunks-cat", "drift"),       # 1 flip of 4, KL 0.151
    ("one-token-chunks-france", "agree"),    # no flip, KL 0.054: inside real 16-bit noise (up to 0.105)
    ("corrupted-weights", "disagree"),       # KL 8.44, every step flipped
])
def test_calibration_runs_get_their_verdicts(name, verdict):
    assert ld.analyse(fixture(name)).verdict == verdict


def test_step0_of_a_prompt_longer_than_a_chunk_is_not_counted_and_said_so():
    text = fixture("chunk128-long-prompt")  # A [4096, 1], B [128, 1], 422 prompt tokens
    blind = ld.analyse(text)
    assert blind.verdict == "disagree" and blind.first_disagreement == 0  # without the chunks: the artefact
    res = ld.analyse(text, chunk_a=4096, chunk_b=128)
    assert res.verdict == "agree" and res.excluded_steps == (0,) and res.counted_steps == 11
    assert "step 0 not counted" in res.exclusion_note and "422 tokens" in res.exclusion_note
    assert res.to_json()["exclusion_note"] == res.exclusion_note and res.kl_used is False
    # Short prompt (37 tokens) over a 16-token chunk: later steps are not bit-identical here, so
    # the mean KL (it includes step 0) is not used and the reason says so.
    short = ld.analyse(fixture("chunk16-short-prompt"), chunk_b=16)
    assert short.verdict == "agree" and any("not used" in r for r in short.reasons)
    # A prompt shorter than every chunk keeps step 0.
    assert ld.analyse(fixture("identical"), chunk_a=128, chunk_b=128).excluded_steps == ()


def test_nothing_compared_is_an_error_never_agree():
    # What the tool prints when B's forward returns nothing (docs/logits-diff.md, "Output format"):
    # the row header, the null line, then a summary with 0 disagreements and no distribution.
    head = "prompt tokens: 37, max new tokens: 16\n" + fixture("identical").splitlines()[2] + "\n"
    null = head + ("forward returned null at step 0\n\nsummary: argmax disagreements=0, first at step -1, "
                   "worst maxAbsDiff=0.00000\n")
    res = ld.analyse(null)
    assert res.verdict == "error" and res.counted_steps == 0
    assert any("forward returned null at step 0" in r for r in res.reasons)
    assert ld.analyse("").verdict == "error"
    assert ld.analyse("load failed\n", exit_code=1).verdict == "error"
    # Rows but the process died before the summary: not a verdict either.
    cut = "\n".join(fixture("identical").splitlines()[:8])
    assert ld.analyse(cut, exit_code=139).verdict == "error"
    # Only step 0 compared and it is the uncounted one.
    one = head.replace("37", "422") + fixture("chunk128-long-prompt").splitlines()[3] + "\n\n" + "\n".join(
        fixture("chunk128-long-prompt").splitlines()[-2:])
    assert ld.analyse(one, chunk_a=4096, chunk_b=128).verdict == "error"


def test_a_row_text_that_holds_a_newline_continues_the_row():
    lines = fixture("identical").splitlines()
    text = "\n".join(lines[:4] + ["second line of step 0"] + lines[4:])
    p = ld.parse(text)
    assert p.steps[0].text == "A\nsecond line of step 0" and len(p.steps) == 16


# ---- CLI -----------------------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "harness.runners.logits_diff", *args], capture_output=True,
                          text=True, env=env, timeout=60)


def test_cli_json_contract():
    out = _cli(str(FIX / "corrupted-weights.stdout"), "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    for key in ("steps", "disagreements", "first_disagreement", "mean_kl", "nll_a", "nll_b",
                "worst_max_abs_diff", "verdict"):
        assert key in d
    assert d["verdict"] == "disagree" and d["steps"] == 16 and d["disagreements"] == 16
    assert d["first_disagreement"] == 0 and d["nll_b"] == 10.80267
    ok = json.loads(_cli(str(FIX / "identical.stdout"), "--json").stdout)
    assert ok["verdict"] == "agree" and ok["first_disagreement"] is None
    text = _cli(str(FIX / "chunk128-long-prompt.stdout"), "--chunk-a", "4096", "--chunk-b", "128")
    assert "agree" in text.stdout and "step 0 not counted" in text.stdout


def test_cli_error_cases(tmp_path):
    missing = _cli(str(tmp_path / "nope.txt"), "--json")
    assert missing.returncode == 2 and "nope.txt" in missing.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    err = tmp_path / "err.txt"
    err.write_text("[Error]: LLM weight file not found: /x/llm.mnn.weight\n")
    d = json.loads(_cli(str(empty), "--stderr", str(err), "--exit-code", "1", "--json").stdout)
    assert d["verdict"] == "error" and d["first_disagreement"] is None
    assert any("weight file not found" in e for e in d["tool_errors"])


# ---- the real binary on the host ----------------------------------------------------------------
def _real_setup(tmp_path: Path, b_changes: dict) -> tuple:
    if not (REAL_RT / TOOL).is_file() or not (REAL_MODEL / "config.json").is_file():
        pytest.skip(f"{REAL_RT} or {REAL_MODEL} is absent (../shared): the real llm_logits_diff run needs them")
    transport = local_device(tmp_path / "device")
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    base = json.loads((REAL_MODEL / "config.json").read_text())
    base["base_dir"] = str(REAL_MODEL) + "/"  # the export stays where it is; configs live here
    (model_dir / "config.json").write_text(json.dumps(base))
    (model_dir / "config_b.json").write_text(json.dumps({**base, **b_changes}))
    model = ProvisionedModel("local", str(model_dir), "mnn", "llama", {BackendPair.parse("cpu"): "config.json"})
    runtime = ProvisionedRuntime("local", str(REAL_RT), posixpath.join(str(REAL_RT), "llm_demo"),
                                 lib_dirs=(str(REAL_RT),))
    return transport, model, runtime


def test_real_binary_identical_configs_agree_end_to_end(tmp_path):
    transport, model, runtime = _real_setup(tmp_path, {})
    runner = ld.LogitsDiffRunner.if_available(transport, runtime, model)
    assert runner is not None
    res = runner.run(CAT, a="cpu", b="config_b.json", max_tokens=8, timeout=300)
    assert res.exit_code == 0, res.stdout + res.stderr
    p = res.parsed
    assert p.prompt_tokens == 37 and len(p.steps) == 8 and p.steps[1].text == " cat"
    assert p.disagreements == 0 and p.mean_kl == 0.0 and p.nll_a == p.nll_b
    assert res.verdict == "agree" and res.first_disagreement is None
    # The derived configs are greedy; the originals were not touched.
    assert json.loads((tmp_path / "model" / "config.json").read_text())["sampler_type"] == "mixed"


def test_real_binary_chunked_prefill_step0_is_excluded(tmp_path):
    """A: one chunk, B: [16, 1] on a 37-token prompt (real run): step 0 differs, the runner
    knows both chunks from the configs and does not count it."""
    transport, model, runtime = _real_setup(tmp_path, {"chunk_limits": [16, 1]})
    runner = ld.LogitsDiffRunner(transport, runtime, model)
    res = runner.run(CAT, a="cpu", b="config_b.json", max_tokens=6, timeout=300)
    assert res.parsed.steps[0].agree is False and res.parsed.first_at == 0
    assert res.chunk_a is None and res.chunk_b == 16 and res.excluded_steps == (0,)
    assert res.verdict == "agree" and "step 0 not counted" in res.describe()


def test_virtual_tool_healthy_close_and_saturated(tmp_path):
    from runner_helpers import install

    transport = local_device(tmp_path / "device")
    healthy = install(transport, tmp_path / "h")
    runner = ld.LogitsDiffRunner(transport, healthy.runtime, healthy.model)
    ok = runner.run("What is the capital of France?", a="cpu", b="qnn", max_tokens=16, extra_env=SM8750_ENV)
    assert ok.verdict == "agree", ok.describe() + ok.stdout
    assert 0 < ok.parsed.mean_kl < DEFAULT_THRESHOLDS.drift_kl and ok.parsed.worst_max_abs_diff > 0
    same = runner.run("What is the capital of France?", a="cpu", b="cpu", max_tokens=16, extra_env=SM8750_ENV)
    assert same.verdict == "agree" and same.parsed.mean_kl == 0.0

    transport2 = local_device(tmp_path / "device2")
    sat = install(transport2, tmp_path / "s", scenario="activation_saturation")
    bad = ld.LogitsDiffRunner(transport2, sat.runtime, sat.model).run(
        "What is the capital of France?", a="cpu", b="qnn", max_tokens=16, extra_env=SM8750_ENV)
    assert bad.verdict == "disagree", bad.describe()
    assert bad.parsed.mean_kl > DEFAULT_THRESHOLDS.disagree_kl and bad.first_disagreement is not None
    assert math.isfinite(bad.nll_gap) and bad.nll_gap > 1


def test_virtual_tool_long_prompt_shows_the_chunk_artefact_only_at_step0(tmp_path):
    from runner_helpers import install

    from harness.runners import Overlay

    transport = local_device(tmp_path / "device")
    s = install(transport, tmp_path / "h")
    runner = ld.LogitsDiffRunner(transport, s.runtime, s.model)
    prompt = "Summarise this list: " + " ".join(f"Item {i} is a small blue box." for i in range(30))
    res = runner.run(prompt, a="cpu", b="cpu", max_tokens=12, overlay_a=Overlay(chunk_limits=(4096, 1)),
                     overlay_b=Overlay(chunk_limits=(128, 1)), extra_env=SM8750_ENV)
    assert res.parsed.prompt_tokens > 128
    assert res.parsed.steps[0].agree is False and all(st.max_abs_diff == 0 for st in res.parsed.steps[1:])
    assert res.excluded_steps == (0,) and res.verdict == "agree"


def test_virtual_tool_qnn_b_that_cannot_run_compares_nothing(tmp_path):
    from runner_helpers import install

    transport = local_device(tmp_path / "device")
    s = install(transport, tmp_path / "h", chunk_limits=[256, 1])  # graphs compiled for 128: shape error
    res = ld.LogitsDiffRunner(transport, s.runtime, s.model).run(
        "What is the capital of France?", a="cpu", b="qnn", max_tokens=8, extra_env=SM8750_ENV)
    assert "forward returned null at step 0" in res.stdout
    assert res.verdict == "error" and res.parsed.disagreements == 0 and not res.parsed.has_distribution
