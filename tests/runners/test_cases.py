"""The default prompt cases and the test image their image prompt shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image as PILImage

from harness.errors import HarnessError
from harness.runners import default_cases, write_test_image

RED, WHITE = (255, 0, 0), (255, 255, 255)


@pytest.mark.parametrize("height,width", [(512, 512), (100, 60)])
def test_test_image_is_a_red_square_over_the_middle_half_on_white(tmp_path: Path, height: int, width: int) -> None:
    path = write_test_image(tmp_path / "in" / "red.png", height=height, width=width)
    image = PILImage.open(path)
    assert (image.format, image.mode, image.size) == ("PNG", "RGB", (width, height))
    px = image.load()
    assert px is not None
    x0, x1, y0, y1 = width // 4, 3 * width // 4, height // 4, 3 * height // 4
    reds = sum(px[x, y] == RED for y in range(height) for x in range(width))
    assert reds == (x1 - x0) * (y1 - y0)
    assert (px[x0, y0], px[x1 - 1, y1 - 1]) == (RED, RED)
    assert (px[x0 - 1, y0], px[x0, y0 - 1], px[x1, y1 - 1], px[x1 - 1, y1], px[0, 0]) == (WHITE,) * 5


def test_test_image_is_written_once(tmp_path: Path) -> None:
    path = write_test_image(tmp_path / "red.png")
    path.write_bytes(b"kept")
    assert write_test_image(path).read_bytes() == b"kept"


def test_image_case_needs_an_image(tmp_path: Path) -> None:
    assert [c.id for c in default_cases(visual=False)] == ["france", "cat"]
    with pytest.raises(HarnessError, match="image prompts need an image file"):
        default_cases(visual=True)
    [*_, image_case] = default_cases(visual=True, image=tmp_path / "red.png", image_sizes=[(64, 32)])
    assert (image_case.id, image_case.prompt.images[0].height, image_case.prompt.images[0].width) == ("image", 64, 32)


def test_default_image_cases_are_non_square_in_both_orientations(tmp_path: Path) -> None:
    from harness.checks.mrope import image_llm_grid

    cases = default_cases(visual=True, image=tmp_path / "red.png")
    images = {c.id: c.prompt.images[0] for c in cases if c.prompt.images}
    assert list(images) == ["image", "image-224x448"]
    grids = [image_llm_grid(i.height or 0, i.width or 0) for i in images.values()]
    assert [(g.h, g.w) for g in grids] == [(14, 7), (7, 14)]  # h > w and w > h on the LLM grid
