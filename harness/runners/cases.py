"""What a run asks and expects: a prompt with the words its answer must hold, the default
cases of the llm_demo matrix and the test image its image prompt shows."""

from __future__ import annotations

import re
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


def default_cases(visual: bool, image: Path | None = None, image_hw: tuple[int, int] = (512, 512)) -> list[PromptCase]:
    cases = [
        PromptCase(Prompt("What is the capital of France? Answer briefly.", id="france"), ("Paris",)),
        PromptCase(Prompt("Describe a cat in two sentences.", id="cat"), ("cat", "cats", "kitten", "feline")),
    ]
    if visual:
        if image is None:
            raise HarnessError("image prompts need an image file: pass image=Path(...)")
        h, w = image_hw
        cases.append(PromptCase(Prompt("Describe the image in one sentence.",
                                       images=(Image(image, height=h, width=w),), id="image")))
    return cases
