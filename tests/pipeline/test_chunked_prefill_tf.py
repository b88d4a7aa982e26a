"""Chunked prefill, teacher-forced (A = one chunk, B = the compiled chunk) where the runtime
holds llm_logits_diff, the greedy-text comparison where it does not; on the virtual runtime
through the local host."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from harness import pipeline
from harness.runners import Image, Prompt, write_test_image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runners"))
from runner_helpers import SM8750_ENV, install, local_device  # noqa: E402

LONG = "Summarise this: " + " ".join(f"Item {i} is a small blue box on the shelf." for i in range(30))


def test_text_prompt_is_teacher_forced_and_agrees_after_step0(tmp_path):
    transport = local_device(tmp_path / "device")
    s = install(transport, tmp_path / "h")
    [res] = pipeline.chunked_prefill_check(s.runner(), [Prompt(LONG, id="long")], backend="cpu",
                                           max_new_tokens=12, extra_env=SM8750_ENV)
    assert res.method == "teacher-forced" and res.equal, res.explain()
    assert res.diff.excluded_steps == (0,) and res.diff.parsed.steps[0].agree is False
    assert "step 0 not counted" in res.explain()


def test_without_the_tool_the_greedy_texts_are_compared(tmp_path):
    transport = local_device(tmp_path / "device")
    s = install(transport, tmp_path / "h")
    Path(s.runtime.remote_dir, "llm_logits_diff").unlink()
    [res] = pipeline.chunked_prefill_check(s.runner(), [Prompt(LONG, id="long")], backend="cpu",
                                           max_new_tokens=12, extra_env=SM8750_ENV)
    assert res.method == "text" and res.equal and res.diff is None


def test_chunk_local_positions_disagree_right_after_the_image_while_the_text_hides_it(tmp_path):
    from virtual_lab.exports import default_behaviour

    behaviour = default_behaviour(True)
    behaviour["prompts"]["<img>"]["cpu/cpu"] = {"posdbg": "chunk_local_bug"}
    transport = local_device(tmp_path / "device")
    s = install(transport, tmp_path / "h", visual=True, behaviour=behaviour)
    image = write_test_image(tmp_path / "red.png")
    prompt = Prompt("Describe the image.", images=(Image(image, height=512, width=512),), id="image")
    # The stock tool shows B no image: not checkable, with the reason, never a verdict.
    [stock] = pipeline.chunked_prefill_check(s.runner(), [prompt], backend="cpu/cpu", max_new_tokens=12,
                                             extra_env=SM8750_ENV)
    assert stock.method == "not checkable" and not stock.checkable and stock.diff is None
    assert "llm_logits_diff_vl" in stock.explain() and "B never sees the image" in stock.explain()
    # The VL build (here the virtual tool under that name) is preferred and compares.
    shutil.copy2(Path(s.runtime.remote_dir, "llm_logits_diff"), Path(s.runtime.remote_dir, "llm_logits_diff_vl"))
    [res] = pipeline.chunked_prefill_check(s.runner(), [prompt], backend="cpu/cpu", max_new_tokens=12,
                                           extra_env=SM8750_ENV)
    assert res.method == "teacher-forced" and not res.equal
    assert res.diff.verdict == "disagree" and res.diff.first_disagreement in (1, 2, 3), res.explain()
    # The greedy texts of the two runs are the same: only the teacher-forced check sees it.
    Path(s.runtime.remote_dir, "llm_logits_diff").unlink()
    Path(s.runtime.remote_dir, "llm_logits_diff_vl").unlink()
    [text] = pipeline.chunked_prefill_check(s.runner(), [prompt], backend="cpu/cpu", max_new_tokens=12,
                                            extra_env=SM8750_ENV)
    assert text.method == "text" and text.equal
