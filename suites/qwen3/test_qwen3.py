"""Qwen3 (text) on the device: static shape guards, activation-quantization metadata,
the QNN and CPU LLM backends with coherence and agreement, and chunked-prefill equivalence.

    pytest suites/qwen3 --device oneplus13 --model-dir EXPORT --runtime-dir RUNTIME [--qnn-sdk SDK]
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import pipeline
from harness.checks.quant import assert_quant_ok, check_file
from harness.checks.shapes import assert_shapes_ok, check_export_shapes
from harness.pairs import BackendPair
from harness.runners.cases import default_cases
from harness.runners.prompts import Prompt

from suites.support import check_export_verdict, check_generation, require_model_type

PAIRS = [p.name for p in BackendPair.all(visual=False)]  # "qnn", "cpu"
CASES = ["france", "cat"]


@pytest.fixture(scope="session")
def cases() -> list[pipeline.PromptCase]:
    return default_cases(visual=False)


@pytest.fixture(scope="session")
def fits(provisioned_model) -> None:  # type: ignore[no-untyped-def]
    """Every device test of this suite skips, with the reason, for another model type."""
    require_model_type(provisioned_model, "qwen3")


def test_export_shapes(model_dir: Path, device_record) -> None:  # type: ignore[no-untyped-def]
    device_record.model = model_dir.name
    assert_shapes_ok(check_export_shapes(model_dir))


def test_quant_metadata(model_dir: Path, device_record) -> None:  # type: ignore[no-untyped-def]
    """Every MLP Mul has its own calibrated range; integer tensors carry no activation quantization."""
    graph = next((model_dir / n for n in ("llm.mnn.json", "llm.mnn.json.gz") if (model_dir / n).is_file()), None)
    if graph is None:
        pytest.skip(f"{model_dir} has no llm.mnn.json(.gz): export with --smooth/--omni keeps it")
    report = check_file(graph)
    device_record.extras["instrument"] = "static-quant"  # the export's verdict reads this record's line
    device_record.extras["quantized_tensors"] = report.quantized_tensors
    assert_quant_ok(report)


@pytest.mark.qnn
@pytest.mark.parametrize("case_id", CASES)
@pytest.mark.parametrize("pair", PAIRS)
def test_generation(matrix, judged, cases, pair: str, case_id: str, device_record, provisioned_model,  # type: ignore[no-untyped-def]
                    backends, device, qnn_runtime) -> None:
    if pair not in matrix:
        pytest.skip(pipeline.pair_skip_reason(pair, provisioned_model, backends, device, qnn_runtime)
                    or f"backend {pair} did not run")
    check_generation(device_record, matrix[pair], judged[(pair, case_id)])


@pytest.mark.qnn
def test_export_verdict(matrix, judged, device_record) -> None:  # type: ignore[no-untyped-def]
    """Teacher-forced figures over all prompts of each pair (a consistent shift fails, one odd
    prompt does not), with the static quant and text coherence lines."""
    check_export_verdict(device_record, matrix, judged, suite="qwen3")


def test_chunked_prefill_equivalence(fits, llm_runner, provisioned_model, device_record) -> None:  # type: ignore[no-untyped-def]
    """Chunk_limits [128, 1] against one large chunk for a prompt longer than a chunk:
    teacher-forced with llm_logits_diff when the runtime has it, else the greedy texts."""
    pair = BackendPair.cpu_reference(visual=False).name
    if pair not in provisioned_model.configs:
        pytest.skip("no CPU config in this export")
    device_record.backend_pair = pair
    prompt = Prompt("Summarise this list: " + " ".join(f"Item {i} is a small blue box on the shelf." for i in range(40)),
                    id="long-text")
    [result] = pipeline.chunked_prefill_check(llm_runner, [prompt], backend=pair)
    device_record.extras["chunked_equivalent"] = result.equal
    device_record.extras["chunked_method"] = result.method
    if result.diff is not None:
        device_record.extras["teacher_forced"] = result.diff.record_extras()
    assert result.equal, result.explain()
