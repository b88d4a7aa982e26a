"""Qwen3-VL on the device: static shape guards, the visual x LLM backend matrix
(QNN/QNN, QNN/CPU, CPU/QNN, CPU/CPU), coherence, agreement with CPU/CPU, runtime shape
guards and chunked-prefill mRoPE positions.

    pytest suites/qwen3_vl --device oneplus13 --model-dir EXPORT --runtime-dir RUNTIME [--qnn-sdk SDK]

The structural checks alone (positions, shapes, chunked equivalence; for exports whose text
means nothing): add `-m structural` (README "Structural checks only").
"""

from __future__ import annotations


import pytest

from harness import pipeline
from harness.checks import mrope
from harness.checks.shapes import assert_shapes_ok, check_export_shapes
from harness.outcomes import FailureClass
from harness.pairs import BackendPair
from harness.runners import vl_chunks
from harness.runners.cases import chunked_image_cases, default_cases

from suites.support import check_generation, require_model_type

PAIRS = [p.name for p in BackendPair.all(visual=True)]  # "qnn/qnn", "qnn/cpu", "cpu/qnn", "cpu/cpu"
CASES = ["france", "cat", "image", "image-224x448"]
pytestmark = [pytest.mark.visual]


@pytest.fixture(scope="session")
def cases(test_image) -> list[pipeline.PromptCase]:  # type: ignore[no-untyped-def]
    return default_cases(visual=True, image=test_image)


@pytest.fixture(scope="session")
def fits(provisioned_model) -> None:  # type: ignore[no-untyped-def]
    """Every device test of this suite skips, with the reason, for another model type."""
    require_model_type(provisioned_model, "qwen3_vl")


@pytest.fixture(scope="session")
def chunked(fits, llm_runner, provisioned_model, test_image) -> list[vl_chunks.ChunkedRun]:  # type: ignore[no-untyped-def]
    """The CPU pair with the compiled chunk and a padding and a non-padding chunking."""
    pair = BackendPair.cpu_reference(visual=True).name
    if pair not in provisioned_model.configs:
        pytest.skip("no CPU/CPU config in this export: the chunked runs need the CPU LLM")
    return vl_chunks.run_chunkings(llm_runner, chunked_image_cases(test_image), pair)


def _run(matrix: dict[str, pipeline.PairRun], pair: str, request: pytest.FixtureRequest) -> pipeline.PairRun:
    if pair not in matrix:
        get = request.getfixturevalue
        pytest.skip(pipeline.pair_skip_reason(pair, get("provisioned_model"), get("backends"), get("device"),
                                     get("qnn_runtime")) or f"backend pair {pair} did not run")
    return matrix[pair]


@pytest.mark.structural
def test_export_shapes(model_dir, device_record, pytestconfig) -> None:  # type: ignore[no-untyped-def]
    """The compiled QNN IO of the export fits Qwen3-VL (before any run), read from its NPU stubs
    (and, with --qnn-sdk, its context binaries)."""
    device_record.model = model_dir.name
    findings = check_export_shapes(model_dir, soc_id=None, qnn_sdk=pytestconfig.getoption("--qnn-sdk"))
    assert_shapes_ok(findings)


@pytest.mark.qnn
@pytest.mark.parametrize("case_id", CASES)
@pytest.mark.parametrize("pair", PAIRS)
def test_generation(matrix, judged, cases, pair: str, case_id: str, device_record, request) -> None:  # type: ignore[no-untyped-def]
    """The cell's verdict from pipeline.decide, as the lab gives it: llm_demo ran cleanly, no
    shape/graph error in its log, the answer coherent and agreeing with CPU/CPU."""
    # Positions are test_mrope_positions' finding (per pair); the lab's record holds them per cell.
    check_generation(device_record, _run(matrix, pair, request), judged[(pair, case_id)],
                     checked_elsewhere={FailureClass.MROPE_POSITIONS})


@pytest.mark.structural
@pytest.mark.parametrize("pair", PAIRS)
def test_runtime_shape_guards(matrix, pair: str, device_record, request) -> None:  # type: ignore[no-untyped-def]
    """None of the shape and graph errors of the reference appear in any run's log."""
    run = _run(matrix, pair, request)
    device_record.backend_pair = pair
    assert_shapes_ok(run.shape_findings)


@pytest.mark.structural
@pytest.mark.parametrize("pair", PAIRS)
def test_mrope_positions(matrix, pair: str, device_record, request) -> None:  # type: ignore[no-untyped-def]
    """Chunked prefill gives every chunk its slice of the 3-axis positions (instrumented runtimes)."""
    run = _run(matrix, pair, request)
    device_record.backend_pair = pair
    if run.position_findings is None:
        pytest.skip(f"{pair}: the runtime printed no [POSDBG] dumps (not an instrumented build)")
    decided = {c: f for c, f in run.position_findings.items() if pipeline.failing_positions(f) or not f}
    if not decided:
        pytest.skip(f"{pair}: the [POSDBG] dumps cannot decide: "
                    + "; ".join(f"{c}: {f[0].message}" for c, f in run.position_findings.items()))
    for case_id, findings in decided.items():
        try:
            mrope.assert_positions_ok(findings)
        except AssertionError as exc:
            raise AssertionError(f"{pair} {case_id}: {exc}") from None


@pytest.mark.structural
@pytest.mark.parametrize("role", vl_chunks.ROLES)
def test_mrope_positions_chunked(chunked, role: str, device_record) -> None:  # type: ignore[no-untyped-def]
    """The CPU pair's positions under the compiled chunk and a padding / non-padding chunking."""
    device_record.backend_pair = BackendPair.cpu_reference(visual=True).name
    verdict = vl_chunks.positions_verdict(chunked, role)
    if verdict.skip:
        pytest.skip(verdict.skip)
    assert not verdict.failures, "mRoPE position check failed: " + "\n".join(verdict.failures)


@pytest.mark.structural
@pytest.mark.parametrize("role", vl_chunks.ROLES)
def test_runtime_shape_guards_chunked(chunked, role: str, device_record) -> None:  # type: ignore[no-untyped-def]
    """No shape or graph error in the CPU pair's chunked runs (e.g. DeepStack rows vs a chunk)."""
    device_record.backend_pair = BackendPair.cpu_reference(visual=True).name
    verdict = vl_chunks.shapes_verdict(chunked, role)
    if verdict.skip:
        pytest.skip(verdict.skip)
    assert not verdict.failures, "shape failure: " + "\n".join(verdict.failures)


@pytest.mark.structural
def test_chunked_prefill_equivalence(fits, llm_runner, provisioned_model, test_image, device_record) -> None:  # type: ignore[no-untyped-def]
    """Black box: chunk_limits [128, 1] against one large chunk, for a
    prompt longer than a chunk, with and without an image (CPU LLM, where chunking is free)."""
    from harness.runners.prompts import Prompt

    pair = BackendPair.cpu_reference(visual=True).name
    if pair not in provisioned_model.configs:
        pytest.skip("no CPU/CPU config in this export")
    device_record.backend_pair = pair
    long_text = "Summarise this: " + " ".join(f"Item {i} is a small blue box on the shelf." for i in range(40))
    prompts = [Prompt(long_text, id="long-text"), *(c.prompt for c in chunked_image_cases(test_image))]
    # Teacher-forced (llm_logits_diff) when the runtime has it, else the greedy texts; an image
    # prompt only with a tool that shows B the image, else "not checkable" with the reason.
    results = pipeline.chunked_prefill_check(llm_runner, prompts, backend=pair)
    device_record.extras["chunked_method"] = results[0].method
    device_record.extras["not_checkable"] = [r.explain() for r in results if not r.checkable]
    bad = [r.explain() for r in results if r.checkable and not r.equal]
    assert not bad, "\n".join(bad)
