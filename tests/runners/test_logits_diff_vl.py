"""The VL teacher-forced tool: a real llm_logits_diff_vl capture with interleaved [POSDBG]
lines parses into clean token text, and the runner prefers the VL build when the runtime holds it."""

from __future__ import annotations

from pathlib import Path

from harness.runners import TOOL, TOOL_VL, logits_diff, pick_tool, shows_b_images, without_engine_text

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "fixtures" / "logits_diff" / "omni-qwen3-vl-tiny-V3-one-vs-140.vl.stdout"


def test_posdbg_lines_between_rows_never_enter_token_text() -> None:
    parsed = logits_diff.parse(CAPTURE.read_bytes().decode("utf-8", errors="replace"))
    assert [s.index for s in parsed.steps] == [0, 1, 2, 3, 4, 5]
    assert not any("POSDBG" in s.text or "\n" in s.text for s in parsed.steps)
    assert [s.text for s in parsed.steps if s.index in (0, 1, 4, 5)] == ["}", "E", "qu", "Y"]
    assert parsed.mean_kl == 0.000273 and parsed.prompt_tokens == 281 and parsed.disagreements == 1


def test_engine_lines_glued_to_text_keep_the_text() -> None:
    assert without_engine_text("qu[POSDBG] all_seq_len=1 seq_len=1 | ax0=1 ax1=1 ax2=1") == "qu"
    assert without_engine_text("[POSDBG] all_seq_len=1 seq_len=1 | ax0=1 ax1=1 ax2=1") is None
    assert without_engine_text("Broad cast error, dim1 = 281, dim2 = 128") is None
    assert without_engine_text(" a token") == " a token"


def test_the_vl_tool_is_preferred_and_shows_b_the_image(tmp_path: Path) -> None:
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from runner_helpers import local_device

    t = local_device(tmp_path / "work")
    rt = tmp_path / "rt"
    rt.mkdir()
    assert pick_tool(t, str(rt)) is None
    (rt / TOOL).write_text("")
    assert pick_tool(t, str(rt)) == TOOL and not shows_b_images(TOOL)
    (rt / TOOL_VL).write_text("")
    assert pick_tool(t, str(rt)) == TOOL_VL and shows_b_images(TOOL_VL)
