"""Reference mRoPE positions, [POSDBG] dump parsing/classification and the black-box check."""

from __future__ import annotations

import pytest

from harness.checks.mrope import (
    CHUNK_LOCAL_BUG,
    DECODE_MISMATCH,
    LENGTH_MISMATCH,
    MISMATCH,
    NO_DUMPS,
    PAST_END,
    RUN_COUNT,
    DecodeRule,
    Image,
    Text,
    Variant,
    assert_chunked_equivalent,
    assert_positions_ok,
    check_position_log,
    check_positions,
    chunked_equivalence,
    format_posdbg,
    image_llm_grid,
    parse_posdbg,
    reference_positions,
    smart_resize,
)
from harness.errors import HarnessError
from virtual_lab.mrope_sim import posdbg_lines, prefill_chunks

# A prompt like "<|im_start|>user\n<img>..</img>Describe..." : 15 text tokens, a 512x512 image
# on Qwen3-VL (16 x 16 after merge, 258 tokens with start/end), then 300 text tokens.
IMAGE_PROMPT: list[Text | Image] = [Text(15), Image(h=16, w=16), Text(300)]


# ---- reference positions ------------------------------------------------------------------


def test_text_only_positions_are_sequential_on_all_axes() -> None:
    ref = reference_positions([Text(5)])
    assert ref.prompt_len == 5
    assert [ref.row(i) for i in range(5)] == [(i, i, i) for i in range(5)]
    assert ref.row(5) == (5, 5, 5)  # decode continues
    assert ref.row(9) == (9, 9, 9)


def test_image_grid_positions_by_hand() -> None:
    # 3 text, image h=3 w=2 (rows: start, 6 grid, end), 2 text = 13 tokens
    ref = reference_positions([Text(3), Image(h=3, w=2), Text(2)], variant=Variant.MNN)
    assert ref.prompt_len == 13
    assert ref.rows(0, 4) == [(0, 0, 0), (1, 1, 1), (2, 2, 2), (3, 3, 3)]  # vision_start at 3
    assert ref.rows(4, 10) == [(4, 4, 4), (4, 4, 5), (4, 5, 4), (4, 5, 5), (4, 6, 4), (4, 6, 5)]
    assert ref.row(10) == (7, 7, 7)  # vision_end = start 4 + max(h=3, w=2)
    assert ref.rows(11, 13) == [(8, 8, 8), (9, 9, 9)]
    assert ref.row(13) == (10, 10, 10)  # first decode token: max position + 1
    assert ref.row(15) == (12, 12, 12)


def test_variants_differ_only_where_documented() -> None:
    segs: list[Text | Image] = [Text(3), Image(h=3, w=2), Text(2)]
    hf = reference_positions(segs, variant=Variant.HF)
    mnn = reference_positions(segs, variant="mnn")
    last_w = reference_positions(segs, variant=Variant.MNN_LAST_W)
    assert hf.axis(0) == mnn.axis(0) and hf.row(13) == mnn.row(13)
    assert last_w.row(10) == (6, 6, 6)  # start 4 + w=2
    assert last_w.row(11) == (7, 7, 7) and last_w.row(13) == (9, 9, 9)
    # video (t > 1): HF restarts after max(t,h,w), MNN after max(h,w)
    video: list[Text | Image] = [Text(1), Image(h=2, w=2, t=3), Text(1)]
    assert reference_positions(video, variant=Variant.HF).row(14) == (5, 5, 5)
    assert reference_positions(video, variant=Variant.MNN).row(14) == (4, 4, 4)


def test_decode_rule_token_count_jumps_after_image() -> None:
    compressed = reference_positions(IMAGE_PROMPT)
    raw = reference_positions(IMAGE_PROMPT, decode_rule=DecodeRule.TOKEN_COUNT)
    n = compressed.prompt_len
    assert n == 15 + 258 + 300
    assert compressed.row(n) == (333, 333, 333)  # 15 + 1 + 16 + 1 + 300
    assert raw.row(n) == (n, n, n)


def test_image_llm_grid_qwen3_sizes() -> None:
    assert image_llm_grid(512, 512) == Image(h=16, w=16)
    assert image_llm_grid(384, 512) == Image(h=12, w=16)  # height first
    assert smart_resize(500, 300) == (512, 288)
    with pytest.raises(ValueError, match="factor"):
        smart_resize(20, 400)


def test_bad_segments_raise() -> None:
    with pytest.raises(ValueError):
        reference_positions([Image(h=0, w=4)])
    with pytest.raises(TypeError):
        reference_positions(["text"])  # type: ignore[list-item]  # the wrong type on purpose


# ---- dump format and parsing ----------------------------------------------------------------


def test_prefill_chunks_pad_remainder() -> None:
    assert prefill_chunks(273, [128, 1]) == [(0, 128, 128), (128, 128, 128), (256, 17, 128)]
    assert prefill_chunks(273, [128, 32, 1])[-1] == (256, 17, 32)
    assert prefill_chunks(1, [128, 1]) == [(0, 1, 1)]


def test_format_and_parse_roundtrip_full_and_summary() -> None:
    axes = [[256, 257, 258], [256, 260, 261], [256, 262, 263]]
    full = format_posdbg(256, 3, 273, axes)
    assert full == "[POSDBG] all_seq_len=256 seq_len=3 listSize=273 | ax0=256,257,258 ax1=256,260,261 ax2=256,262,263"
    summ = format_posdbg(256, 3, 273, axes, full=False, gen_seq_len=None)
    assert "ax0[first=256 min=256 max=258 sum=771 last=258]" in summ
    text = f"12-02 I/MNNJNI( 123): {full}\nnoise\n{summ}\n"
    d_full, d_sum = parse_posdbg(text)
    assert d_full.axes == tuple(tuple(a) for a in axes) and d_full.list_size == 273
    assert d_full.line_no == 1 and d_sum.line_no == 3
    assert d_sum.summary is not None and d_sum.summary[1]["max"] == 261
    decode = parse_posdbg(format_posdbg(573, 1, 573, [[333], [333], [333]], gen_seq_len=1))[0]
    assert decode.is_decode and decode.gen_seq_len == 1


@pytest.mark.parametrize(
    "line",
    [
        "[POSDBG] seq_len=3 | ax0=1,2,3 ax1=1,2,3 ax2=1,2,3",
        "[POSDBG] all_seq_len=0 seq_len=3 | ax0=1,2 ax1=1,2,3 ax2=1,2,3",
        "[POSDBG] all_seq_len=0 seq_len=3 | ax0=1,2,3",
        "[POSDBG] all_seq_len=0 seq_len=3 | ax0[foo=1] ax1[first=1] ax2[first=1]",
    ],
)
def test_malformed_dump_lines_raise_clear_error(line: str) -> None:
    with pytest.raises(HarnessError, match="log line 1"):
        parse_posdbg(line)


# ---- classification -------------------------------------------------------------------------


@pytest.mark.parametrize("full", [True, False])
def test_correct_runtime_passes(full: bool) -> None:
    ref = reference_positions(IMAGE_PROMPT)
    log = "\n".join(posdbg_lines(ref, mode="ok", decode_tokens=3, full=full))
    assert check_position_log(log, ref) == []
    assert_positions_ok([])


@pytest.mark.parametrize("full", [True, False])
def test_chunk_local_bug_is_classified(full: bool) -> None:
    ref = reference_positions(IMAGE_PROMPT)
    log = "\n".join(posdbg_lines(ref, mode="chunk_local_bug", decode_tokens=2, full=full))
    findings = check_position_log(log, ref)
    assert {f.kind for f in findings} == {CHUNK_LOCAL_BUG}
    assert [f.where.chunk for f in findings] == [1, 2, 3, 4]  # chunk 0 is right, decode is right
    if full:
        first = findings[0]
        # token 128 is grid row (128-16)//16 = 7: (16, 23, 16); the bug gives list[0] + 128
        assert (first.where.index, first.where.axis, first.expected, first.found) == (128, 0, 16, 128)


def test_chunk_local_bug_is_invisible_for_text_only() -> None:
    ref = reference_positions([Text(300)])
    log = "\n".join(posdbg_lines(ref, mode="chunk_local_bug"))
    assert check_position_log(log, ref) == []  # sequential positions: same values either way


@pytest.mark.parametrize("full", [True, False])
def test_past_end_is_classified(full: bool) -> None:
    ref = reference_positions(IMAGE_PROMPT)
    log = "\n".join(posdbg_lines(ref, mode="past_end", full=full))
    findings = check_position_log(log, ref)
    assert {f.kind for f in findings} == {PAST_END}
    assert findings[0].where.chunk == 1 and findings[0].where.index == 128
    # The full form shows the fallback row; a summary cannot (padding may hold anything).
    assert findings[0].found == ((128, 128, 128) if full else None)


def test_past_end_flagged_even_when_values_coincide() -> None:
    ref = reference_positions([Text(200)])
    log = "\n".join(posdbg_lines(ref, mode="past_end", list_size=150))
    findings = check_position_log(log, ref)
    assert [f.kind for f in findings] == [PAST_END]
    assert findings[0].where.index == 150


def test_other_differences_are_plain_mismatch() -> None:
    # A tall image (h=16 > w=8): a runtime restarting text at start + w instead of max(h, w).
    segs: list[Text | Image] = [Text(15), Image(h=16, w=8), Text(300)]
    ref = reference_positions(segs)
    wrong = reference_positions(segs, variant=Variant.MNN_LAST_W)
    findings = check_position_log("\n".join(posdbg_lines(wrong, mode="ok")), ref)
    assert findings and {f.kind for f in findings} == {MISMATCH}
    first = findings[0]
    # vision_end is token 15 + 1 + 128 = 144, in chunk 1: expected 16 + 16, got 16 + 8
    assert (first.where.chunk, first.where.index, first.where.axis, first.expected, first.found) == (1, 144, 0, 32, 24)


def test_decode_mismatch_detected() -> None:
    ref = reference_positions(IMAGE_PROMPT)
    raw = reference_positions(IMAGE_PROMPT, decode_rule=DecodeRule.TOKEN_COUNT)
    log = "\n".join(posdbg_lines(raw, mode="ok", decode_tokens=2))
    findings = check_position_log(log, ref)
    assert [f.kind for f in findings] == [DECODE_MISMATCH, DECODE_MISMATCH]
    assert findings[0].where.decode_step == 0 and findings[0].expected == 333 and findings[0].found == 573


def test_runs_length_and_missing_dumps() -> None:
    a = reference_positions([Text(10)])
    b = reference_positions([Text(20)])
    log = "\n".join(posdbg_lines(a) + posdbg_lines(b))
    assert check_position_log(log, [a, b]) == []
    assert [f.kind for f in check_position_log(log, [a])] == [RUN_COUNT]
    longer = check_position_log("\n".join(posdbg_lines(b)), a)
    assert LENGTH_MISMATCH in {f.kind for f in longer}
    assert [f.kind for f in check_positions([], a)] == [NO_DUMPS]


def test_assert_positions_ok_explains_chunk_axis_index() -> None:
    ref = reference_positions(IMAGE_PROMPT)
    findings = check_position_log("\n".join(posdbg_lines(ref, mode="chunk_local_bug")), ref)
    with pytest.raises(AssertionError) as err:
        assert_positions_ok(findings)
    msg = str(err.value)
    assert "prefill chunk 1" in msg and "axis 0 (T)" in msg and "token 128" in msg
    assert "expected 16, got 128" in msg and "mPositionIds[all_seq_len + i]" in msg


# ---- black-box equivalence ------------------------------------------------------------------


def test_chunked_equivalence() -> None:
    ok = chunked_equivalence("The capital is Paris.\r\n", "The capital is Paris.")
    assert ok.equal
    assert_chunked_equivalent(ok)
    bad = chunked_equivalence("The image shows a cat.", "The image shows a dog.", label="image")
    assert not bad.equal and bad.first_diff == 18
    with pytest.raises(AssertionError, match="image.*character 18"):
        assert_chunked_equivalent(bad)
    assert chunked_equivalence("abcX", "abcY", compare_chars=3).equal
    assert not chunked_equivalence("", "  \n").equal  # nothing to compare is a failure
    prefix = chunked_equivalence("Paris", "Paris is nice")
    assert not prefix.equal and "prefix" in prefix.reason
