"""The positions check on REAL `llm_demo` captures of MNN's Omni runtime (four libllm.so variants,
the tiny Qwen3-VL export, MNN_POSDBG=full; fixtures/llm_demo/omni-qwen3-vl-tiny/README.md):
the checker, `judge_log` and `python -m harness.checks.mrope` give the same verdicts, which
docs/posdbg.md#what-the-real-engine-showed records. No ../shared needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.checks import mrope
from harness.checks.mrope.cli import main as mrope_cli
from harness.runners.llm_demo import analyse

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "fixtures" / "llm_demo" / "omni-qwen3-vl-tiny"
TALL, WIDE = mrope.Image(h=14, w=7), mrope.Image(h=7, w=14)

# capture -> (verdict, finding kinds in order)
EXPECTED: dict[str, tuple[str, list[str]]] = {
    **{f"{v}-chunk-one.full": ("pass", []) for v in ("V0", "V1", "V2", "V3")},
    "V1-chunk-one.wide.full": ("pass", []),
    "V3-chunk-one.wide.full": ("pass", []),
    "V0-chunk-128.full": ("fail", ["chunk_local_bug", "chunk_local_bug"]),
    "V1-chunk-128.full": ("fail", ["chunk_local_bug", "chunk_local_bug"]),
    "V1-chunk-128.wide.full": ("fail", ["chunk_local_bug", "chunk_local_bug"]),
    "V2-chunk-128.full": ("pass", []),
    "V3-chunk-128.full": ("pass", []),
    "V3-chunk-128.wide.full": ("pass", []),
    # 281 = 140 + 140 + 1: the last one-row call is chunk-local too (list[0] + 280).
    "V0-chunk-140.full": ("fail", ["chunk_local_bug", "chunk_local_bug"]),
    "V1-chunk-140.full": ("fail", ["chunk_local_bug", "chunk_local_bug"]),
    "V2-chunk-140.full": ("pass", []),
    "V3-chunk-140.full": ("pass", []),
    "V0-chunk-64.full": ("fail", ["row_inflation"]),
    **{f"{v}-chunk-64.full": ("fail", ["row_inflation", "past_end", "past_end", "past_end"])
       for v in ("V1", "V2", "V3")},
    # The summary form cannot anchor a reference without a tokenizer.
    "V2-chunk-128.summary": ("unchecked", ["no_reference"]),
    "V3-chunk-128.summary": ("unchecked", ["no_reference"]),
}


def _text(name: str) -> str:
    return (CAPTURES / f"{name}.stdout").read_bytes().decode("utf-8", errors="replace")


def _reference(name: str) -> mrope.Positions:
    """The prompt as a tokenizer gives it: 28 text tokens, the image, 153 text tokens."""
    return mrope.reference_positions([mrope.Text(28), WIDE if ".wide" in name else TALL, mrope.Text(153)])


def test_every_capture_has_an_expectation() -> None:
    assert sorted(p.name.removesuffix(".stdout") for p in CAPTURES.glob("*.stdout")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_verdict_from_the_dump_alone(name: str) -> None:
    verdict = mrope.judge_log(_text(name))
    want, kinds = EXPECTED[name]
    assert (verdict.verdict, [f.kind for f in verdict.findings]) == (want, kinds), verdict.explain()
    assert verdict.warmup_lines == 7  # start-up tuning: seven decode-form lines, not a prompt


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if "summary" not in n))
def test_same_verdict_with_the_tokenizers_reference(name: str) -> None:
    text = _text(name)
    by_tokenizer = mrope.judge_log(text, reference=_reference(name))
    from_dump = mrope.judge_log(text)
    assert by_tokenizer.verdict == from_dump.verdict
    assert [f.kind for f in by_tokenizer.findings] == [f.kind for f in from_dump.findings]
    # With the grids given (the suite's case), too.
    given = mrope.judge_log(text, images=[WIDE if ".wide" in name else TALL], prompt_len=281)
    assert [f.kind for f in given.findings] == [f.kind for f in from_dump.findings]


def test_chunk_local_finding_names_chunk_row_and_values() -> None:
    [first, second] = mrope.judge_log(_text("V1-chunk-128.full")).findings
    assert (first.where.chunk, first.where.index, first.where.axis, first.expected, first.found) == (1, 128, 0, 44, 128)
    assert (second.where.chunk, second.where.index, second.expected, second.found) == (2, 256, 172, 256)
    assert "prefill chunk 1" in first.explain() and "row 0 of the call" in first.explain()
    v0, last = mrope.judge_log(_text("V0-chunk-140.full")).findings
    assert (v0.where.chunk, v0.where.index, v0.expected, v0.found) == (1, 140, 56, 140)
    assert (last.where.chunk, last.where.seq_len, last.where.index, last.expected, last.found) == (2, 1, 280, 196, 280)


def test_row_inflation_names_the_rows_and_the_image() -> None:
    inflated, *past = mrope.judge_log(_text("V3-chunk-64.full")).findings
    assert inflated.kind == "row_inflation" and (inflated.expected, inflated.found) == (281, 374)
    assert "first token chunk of 64 tokens was forwarded as 157 rows" in inflated.message
    assert [(f.kind, f.where.all_seq_len, f.where.index) for f in past] == [
        ("past_end", 221, 281), ("past_end", 285, 285), ("past_end", 349, 349)]
    with_ref = mrope.judge_log(_text("V3-chunk-64.full"), reference=_reference("V3-chunk-64.full"))
    assert "chunk boundary at token 64 falls inside the image block at tokens 28..127" in with_ref.findings[0].message
    # V0 stops on the first call: the shape error's rows are the evidence.
    [v0] = mrope.judge_log(_text("V0-chunk-64.full")).findings
    assert (v0.where.chunk, v0.expected, v0.found) == (0, 64, 157) and "dim1 = 157, dim2 = 64" in v0.message


def test_padding_rows_are_masked_whatever_they_hold() -> None:
    """V2's padding rows hold the index (281..), V3's continue (197..): both right."""
    for name in ("V2-chunk-128", "V3-chunk-128"):
        full = mrope.judge_log(_text(f"{name}.full"))
        assert full.verdict == "pass", full.explain()
        summary = mrope.judge_log(_text(f"{name}.summary"), reference=_reference(name))
        assert summary.verdict == "pass", summary.explain()


def test_summary_over_padding_is_still_checked_where_it_can_be() -> None:
    text = _text("V3-chunk-128.summary")
    # A first value off in the padded call is still caught.
    bad = text.replace("all_seq_len=256 seq_len=128 listSize=281 | ax0[first=172", "all_seq_len=256 seq_len=128 "
                       "listSize=281 | ax0[first=256")
    assert bad != text
    [finding] = mrope.judge_log(bad, reference=_reference("V3")).findings
    assert finding.kind in ("mismatch", "chunk_local_bug") and finding.where.chunk == 2 and "summary first" in finding.message


def test_decode_positions_follow_the_prompts_largest_position() -> None:
    text = _text("V3-chunk-one.full")
    bad = text.replace("gen_seq_len=1 | ax0=197 ax1=197 ax2=197", "gen_seq_len=1 | ax0=281 ax1=281 ax2=281")
    [finding] = mrope.judge_log(bad).findings
    assert (finding.kind, finding.where.decode_step, finding.expected, finding.found) == ("decode_mismatch", 0, 197, 281)


def test_swapped_grid_shows_against_the_expected_grid() -> None:
    """A runtime that swapped h and w would print the wide grid for the tall image."""
    given = mrope.judge_log(_text("V3-chunk-one.wide.full"), images=[TALL], prompt_len=281)
    assert given.verdict == "fail" and given.findings[0].kind == "mismatch"


def test_v0_deepstack_failure_is_a_shape_failure() -> None:
    for name in ("V0-chunk-128.full", "V0-chunk-64.full"):
        _parsed, cls = analyse(_text(name), "", exit_code=0, prompts=["x"])
        assert cls.cls == "shape-error" and cls.signature_ids[0] == "broadcast-error"
    _parsed, cls = analyse(_text("V1-chunk-128.full"), "", exit_code=0, prompts=["x"])
    assert cls.cls == "ok"


@pytest.mark.parametrize("name", ["V3-chunk-128.full", "V1-chunk-128.full", "V2-chunk-64.full", "V2-chunk-128.summary"])
def test_cli_json_gives_the_same_verdict(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = mrope_cli([str(CAPTURES / f"{name}.stdout"), "--json"])
    out = json.loads(capsys.readouterr().out)
    want, kinds = EXPECTED[name]
    assert out["verdict"] == want and [f["kind"] for f in out["findings"]] == kinds
    assert code == {"pass": 0, "fail": 1, "unchecked": 2}[want]
    assert all(f["explain"].startswith(f"[{f['kind']}]") for f in out["findings"])


def test_cli_as_a_module(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "harness.checks.mrope", str(CAPTURES / "V1-chunk-140.full.stdout")],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 1 and "[chunk_local_bug]" in proc.stdout and "7 warm-up line(s)" in proc.stdout
    missing = subprocess.run([sys.executable, "-m", "harness.checks.mrope", str(tmp_path / "none.txt")],
                             capture_output=True, text=True, cwd=REPO, timeout=120)
    assert missing.returncode == 4 and "cannot read" in missing.stderr
