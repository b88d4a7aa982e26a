"""The pipeline's log checks on captured llm_demo output: [POSDBG] dumps checked against a
reference anchored on the first chunk, and the cases where no honest reference exists."""

from __future__ import annotations

from pathlib import Path

from harness import pipeline
from harness.checks import mrope
from harness.findings import Finding
from harness.runners import Image, Prompt, PromptCase, write_test_image
from harness.runners.llm_demo import LlmDemoResult, ProcessRun, analyse
from virtual_lab import mrope_sim

SUMMARY = ("\n#################################\nprompt tokens num = {n}\ndecode tokens num = 3\n"
           "prefill time = 0.10 s\n decode time = 0.10 s\nprefill speed = 10.00 tok/s\n"
           " decode speed = 30.00 tok/s\n##################################\n")


def _positions(run: LlmDemoResult, cases: list[PromptCase]) -> dict[str, list[Finding]]:
    found = pipeline.position_findings_of(run, cases)
    assert found is not None, "the run printed no [POSDBG] dumps"
    return found


def _result(prompt: Prompt, posdbg: list[str], n: int) -> LlmDemoResult:
    stdout = "\n".join(posdbg) + "\nThe image shows a red square.\n" + SUMMARY.format(n=n)
    parsed, cls = analyse(stdout, "", exit_code=0, prompts=[prompt.text])
    run = ProcessRun(["llm_demo"], [prompt.text], stdout, "", None, 0, False, 0.1, parsed, cls)
    return LlmDemoResult([run], parsed.prompts)


def _image_prompt(tmp_path: Path, hw: bool = True) -> Prompt:
    img = write_test_image(tmp_path / "img.png")
    image = Image(img, height=512, width=512) if hw else Image(img)
    return Prompt("Describe the image.", images=(image,), id="image")


def _ref() -> mrope.Positions:
    # <hw>512, 512</hw> on Qwen3-VL: a 16 x 16 grid after merge.
    return mrope.reference_positions([mrope.Text(20), mrope.image_llm_grid(512, 512), mrope.Text(30)])


def test_correct_dumps_pass_and_the_chunk_local_bug_is_named(tmp_path: Path) -> None:
    prompt = _image_prompt(tmp_path)
    case = PromptCase(prompt)
    ref = _ref()
    good = _result(prompt, mrope_sim.posdbg_lines(ref, mode="ok"), len(ref))
    assert _positions(good, [case]) == {"image": []}
    bad = _result(prompt, mrope_sim.posdbg_lines(ref, mode="chunk_local_bug"), len(ref))
    kinds = {f.kind for f in _positions(bad, [case])["image"]}
    assert kinds == {"chunk_local_bug"}


def test_no_dumps_means_not_instrumented(tmp_path: Path) -> None:
    prompt = _image_prompt(tmp_path)
    assert pipeline.position_findings_of(_result(prompt, [], 50), [PromptCase(prompt)]) is None


def test_image_without_hw_takes_its_grid_from_the_dump(tmp_path: Path) -> None:
    """No <hw>: the device's resize decides the grid; the first call shows it when the image
    ends inside it (the CLI on a capture does the same), else the dump cannot decide."""
    prompt = _image_prompt(tmp_path, hw=False)
    ref = mrope.reference_positions([mrope.Text(20), mrope.image_llm_grid(448, 224), mrope.Text(200)])
    res = _result(prompt, mrope_sim.posdbg_lines(ref, mode="ok"), len(ref))
    assert _positions(res, [PromptCase(prompt)])["image"] == []
    bad = _result(prompt, mrope_sim.posdbg_lines(ref, mode="chunk_local_bug"), len(ref))
    assert {f.kind for f in _positions(bad, [PromptCase(prompt)])["image"]} == {
        "chunk_local_bug"}
    # An image the first call cuts off: no guessed grid.
    cut = _result(prompt, mrope_sim.posdbg_lines(_ref(), mode="ok"), len(_ref()))  # 256 pads from token 21
    findings = _positions(cut, [PromptCase(prompt)])["image"]
    assert [f.kind for f in findings] == ["no_reference"] and not pipeline.failing_positions(findings)


def test_warmup_lines_are_not_a_prompt(tmp_path: Path) -> None:
    prompt = _image_prompt(tmp_path)
    ref = _ref()
    warmup = ["[POSDBG] all_seq_len=0 seq_len=1 listSize=0 gen_seq_len=1 | ax0=1 ax1=1 ax2=1"] * 7
    res = _result(prompt, warmup + mrope_sim.posdbg_lines(ref, mode="ok", decode_tokens=3), len(ref))
    assert _positions(res, [PromptCase(prompt)]) == {"image": []}
    only = _result(prompt, warmup, len(ref))  # an instrumented build whose prompt printed nothing
    assert pipeline.position_findings_of(only, [PromptCase(prompt)]) is None


def test_malformed_dump_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    prompt = _image_prompt(tmp_path)
    res = _result(prompt, ["[POSDBG] all_seq_len=0 | ax0=1,2"], 50)
    findings = _positions(res, [PromptCase(prompt)])["image"]
    assert [f.kind for f in findings] == ["malformed_dump"]
