"""What a run asks and expects: a prompt with the words its answer must hold, the default
cases of the llm_demo matrix and the test image its image prompt shows."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from PIL import Image as PILImage
from PIL import ImageDraw

from harness.errors import HarnessError
from harness.runners.prompts import Image, Prompt


@dataclass(frozen=True)
class PromptCase:
    prompt: Prompt
    expect_any: tuple[str, ...] = ()  # at least one of these words must appear

    @property
    def id(self) -> str:
        return self.prompt.id or re.sub(r"\W+", "-", self.prompt.text.lower()).strip("-")[:32]


def write_test_image(path: Path, height: int = 512, width: int = 512) -> Path:
    """A real PNG (a red square over the middle half, on white) for image prompts; written
    once, reused."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    image = PILImage.new("RGB", (width, height), (255, 255, 255))
    # Pillow's rectangle includes its far corner: the square covers [w/4, 3w/4) x [h/4, 3h/4).
    ImageDraw.Draw(image).rectangle((width // 4, height // 4, 3 * width // 4 - 1, 3 * height // 4 - 1),
                                    fill=(255, 0, 0))
    image.save(path, format="PNG")
    return path


# Non-square in both orientations on the LLM grid (Qwen3-VL, factor 32: 14 x 7 and 7 x 14): a
# fault that mixes up h and w shows in one orientation only (docs/posdbg.md#mrope-position-rules).
IMAGE_SIZES: tuple[tuple[int, int], ...] = ((448, 224), (224, 448))
# The image prompts' text: with the image it is longer than a 128-token chunk, so every pair
# whose LLM is chunked (QNN always) carries the image's positions and DeepStack rows across
# chunks, while the image itself stays inside the first chunk (280 tokens with the 448 x 224
# image on the tiny Qwen3-VL export; docs/posdbg.md#chunked-prefill).
LONG_IMAGE_TEXT = ("Look at this small picture here for me, please, and tell me about the shapes and colours you "
                   "can see in it, then write a few words about the red box, the white space around it, and what "
                   "the whole picture might mean to a person who sees it for the first time on a quiet morning at "
                   "home with a cup of hot tea and a big cake.")


def _image_id(i: int, h: int, w: int) -> str:
    return "image" if i == 0 else f"image-{h}x{w}"


def default_cases(visual: bool, image: Path | None = None,
                  image_sizes: Sequence[tuple[int, int]] = IMAGE_SIZES) -> list[PromptCase]:
    """france, cat, and for a VL export one image prompt per size (`<hw>H, W</hw>`; ids
    `image`, `image-HxW`)."""
    cases = [
        PromptCase(Prompt("What is the capital of France? Answer briefly.", id="france"), ("Paris",)),
        PromptCase(Prompt("Describe a cat in two sentences.", id="cat"), ("cat", "cats", "kitten", "feline")),
    ]
    if visual:
        if image is None:
            raise HarnessError("image prompts need an image file: pass image=Path(...)")
        for i, (h, w) in enumerate(image_sizes):
            cases.append(PromptCase(Prompt(LONG_IMAGE_TEXT, images=(Image(image, height=h, width=w),), id=_image_id(i, h, w))))
    return cases


def chunked_image_cases(image: Path, image_sizes: Sequence[tuple[int, int]] = IMAGE_SIZES) -> list[PromptCase]:
    """The default image cases, for the chunked-prefill runs of a VL export's CPU pair."""
    return [c for c in default_cases(True, image, image_sizes) if c.prompt.images]
