"""Prompt files for `llm_demo`: one prompt per line, multimodal tags for images.

llm_demo reads the file with getline (docs/llm-demo-output.md#prompt-file): empty lines are
skipped, a trailing CR is dropped, lines starting with `#` are skipped and a first line
`id,question,A,B,C,D,answer` switches to C-Eval mode. A prompt that would be mangled by
any of these rules is refused here with a clear error instead of silently changing the run.
Images are referenced relative to the cwd (that is where llm_demo opens them), so the
runner pushes each image into the run folder under the name written in the tag.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError

CEVAL_HEADER = "id,question,A,B,C,D,answer"


@dataclass(frozen=True)
class Image:
    path: Path  # on the host
    height: int | None = None  # <hw>H, W</hw>: height first (Omni::tokenizer_encode)
    width: int | None = None

    def __post_init__(self) -> None:
        if (self.height is None) != (self.width is None):
            raise HarnessError(f"image {self.path}: give both height and width for the <hw> override, or neither")
        for name, v in (("height", self.height), ("width", self.width)):
            if v is not None and (not isinstance(v, int) or v <= 0):
                raise HarnessError(f"image {self.path}: {name} must be a positive integer, got {v!r}")

    def remote_name(self) -> str:
        """A stable, shell- and tag-safe file name for the device copy."""
        digest = hashlib.sha256(str(Path(self.path).resolve()).encode()).hexdigest()[:10]
        suffix = Path(self.path).suffix.lower() if Path(self.path).suffix.isascii() else ""
        return f"img_{digest}{suffix}"


@dataclass(frozen=True)
class Prompt:
    text: str
    images: tuple[Image, ...] = field(default_factory=tuple)
    id: str = ""

    @staticmethod
    def of(item: Prompt | str) -> Prompt:
        return item if isinstance(item, Prompt) else Prompt(str(item))


def _check_text(text: str, where: str) -> None:
    if "\n" in text or "\r" in text:
        raise HarnessError(f"{where}: contains a line break, but llm_demo reads one prompt per line; "
                           "write it on one line (or use a runtime built with LLM_DEMO_ONELINE)")
    if "</img>" in text or "<img>" in text:
        raise HarnessError(f"{where}: contains an <img> tag; pass images as Prompt(images=...) so the "
                           "runner pushes them with the prompt")


def render_prompt(prompt: Prompt, index: int = 0) -> str:
    """The prompt file line: image tags (with the optional <hw> override) then the text."""
    where = f"prompt #{index + 1}" + (f" ({prompt.id})" if prompt.id else "")
    _check_text(prompt.text, where)
    tags = []
    for img in prompt.images:
        hw = f"<hw>{img.height}, {img.width}</hw>" if img.height is not None else ""
        tags.append(f"<img>{hw}{img.remote_name()}</img>")
    line = "".join(tags) + prompt.text
    if not line.strip():
        raise HarnessError(f"{where}: is empty; llm_demo skips empty lines, so give it some text")
    if line.startswith("#"):
        raise HarnessError(f"{where}: starts with '#', which llm_demo skips as a comment; "
                           "rephrase it or start it with a space")
    if index == 0 and line == CEVAL_HEADER:
        raise HarnessError(f"{where}: is the C-Eval header, which switches llm_demo to C-Eval mode")
    return line


def render_prompt_file(prompts: Sequence[Prompt | str]) -> str:
    if not prompts:
        raise HarnessError("no prompts given; llm_demo exits 1 on an empty prompt file")
    lines = [render_prompt(Prompt.of(p), i) for i, p in enumerate(prompts)]
    return "\n".join(lines) + "\n"


def images_of(prompts: Sequence[Prompt | str]) -> dict[str, Path]:
    """remote name -> host file for every image of the prompts (checked to exist)."""
    out: dict[str, Path] = {}
    for i, item in enumerate(prompts):
        for img in Prompt.of(item).images:
            if not Path(img.path).is_file():
                raise HarnessError(f"prompt #{i + 1}: image {img.path} does not exist; fix the path")
            out[img.remote_name()] = Path(img.path)
    return out


def count_prompt_lines(text: str) -> int:
    """How many prompts llm_demo reads from a prompt file's text (the rules above)."""
    return sum(1 for line in text.split("\n") if line.rstrip("\r").strip() and not line.startswith("#"))
