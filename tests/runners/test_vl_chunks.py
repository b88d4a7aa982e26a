"""The chunkings a VL export's CPU pair runs (harness/runners/vl_chunks.py): the compiled chunk,
a padding and a non-padding one that keep chunk boundaries out of the image, and one that
splits the image."""

from __future__ import annotations

import pytest

from harness.runners import Chunking, chunkings, pads


def test_pads_is_a_remainder_past_one_row() -> None:
    assert pads(281, 128) and not pads(281, 140) and not pads(280, 140) and not pads(256, 128)
    assert not pads(129, 128)  # 128 + 1: the entry 1 takes the last row


def test_the_issue_prompt_gets_128_padded_140_unpadded_and_an_image_split() -> None:
    # 28 text tokens, the 14 x 7 image at tokens 28..127, 153 text tokens (docs/posdbg.md).
    got = chunkings(281, 128, [(28, 127)])
    assert got == [Chunking("compiled", (128, 1), True), Chunking("no-padding", (140, 1), False),
                   Chunking("image-split", (78, 1), True)]


def test_a_compiled_chunk_that_does_not_pad_gets_a_padding_partner() -> None:
    got = chunkings(256, 128, [(3, 102)])
    assert got[:2] == [Chunking("compiled", (128, 1), False), Chunking("padding", (127, 1), True)]


@pytest.mark.parametrize("n,compiled,image", [(281, 128, (100, 199)), (300, 64, (10, 150)), (500, 128, (120, 400))])
def test_extra_chunkings_keep_boundaries_out_of_the_image(n: int, compiled: int, image: tuple[int, int]) -> None:
    for c in chunkings(n, compiled, [image]):
        size = c.limits[0]  # type: ignore[index]  # these chunkings all have limits
        inside = [b for b in range(size, n, size) if image[0] < b <= image[1]]
        if c.role in ("padding", "no-padding"):
            assert not inside, c
        if c.role == "image-split":
            assert inside and inside[0] == size, c
        assert c.pads == pads(n, size)


def test_text_only_prompts_get_no_image_split() -> None:
    assert [c.role for c in chunkings(281, 128)] == ["compiled", "no-padding"]
