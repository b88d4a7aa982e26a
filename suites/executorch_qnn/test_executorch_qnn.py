"""ExecuTorch QNN exports on the device: the quant-format matrix (skipped with the HTP-arch
reason where the format cannot run), qnn_llama_runner perf capture, and an ETDump profile.

    pytest suites/executorch_qnn --device oneplus13 --model-dir ET_EXPORTS --runtime-dir ET_RUNTIME [--qnn-sdk SDK]

ET_EXPORTS holds one folder per quant format (16a4w/, 16a8w/, 8a8w/, 16a4w_block/ ...), each an
ExecuTorch export (.pte + tokenizer) as llama.py writes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.provision import provision_model
from harness.runners.etdump import analyse_etdump, executorch_available
from harness.runners.executorch import LlamaRunConfig, QnnExecutorRunner, QnnLlamaRunner, observer_metrics
from harness.runners.quant_matrix import QUANT_FORMATS, skip_reason

PROMPT = "What is the capital of France? Answer briefly."


def _export(model_dir: Path, quant: str) -> Path:
    folder = model_dir / quant
    if not any(folder.glob("*.pte")):
        pytest.skip(f"{folder} holds no .pte: no export for {quant}")
    return folder


def _tokenizer(folder: Path) -> str:
    for name in ("tokenizer.json", "tokenizer.model", "tokenizer.bin"):
        if (folder / name).is_file():
            return name
    pytest.fail(f"{folder}: no tokenizer (tokenizer.json / .model / .bin) next to the .pte", pytrace=False)


@pytest.mark.qnn
@pytest.mark.parametrize("quant", QUANT_FORMATS)
def test_quant_format_runs(quant: str, device, transport, qnn_runtime, model_dir: Path, device_record, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """qnn_llama_runner answers with each quant format the device's HTP arch supports."""
    reason = skip_reason(quant, device.htp_arch)
    if reason:
        pytest.skip(f"{quant} on {device.name} ({device.htp_arch}): {reason}")
    folder = _export(model_dir, quant)
    model = provision_model(transport, folder, name=f"{model_dir.name}-{quant}")
    cfg = LlamaRunConfig(model_path=next(iter(model.configs.values())), tokenizer_path=_tokenizer(folder),
                         prompts=(PROMPT,))
    result = QnnLlamaRunner(transport, qnn_runtime, model.remote_dir).run(cfg, local_dir=tmp_path)
    device_record.backend_pair = f"qnn:{quant}"
    device_record.model = model.model_type
    assert result.ok, f"{quant}: qnn_llama_runner failed ({result.classification.cls}): {result.classification.errors[:3]}"
    metrics = observer_metrics(result.stats or {})
    device_record.prefill_tps = metrics.get("prefill_tok_s")
    device_record.decode_tps = metrics.get("decode_tok_s")
    assert result.outputs_text, f"{quant}: outputs.txt is empty"


def test_etdump_profile(transport, qnn_runtime, model_dir: Path, tmp_path, device_record) -> None:  # type: ignore[no-untyped-def]
    """qnn_executor_runner writes an ETDump; with the `executorch` extra it is analysed (CYCLES)."""
    if not executorch_available():
        pytest.skip("the optional `executorch` extra is not installed: pip install 'harness[executorch]'")
    folder = next((f for f in sorted(model_dir.iterdir()) if f.is_dir() and any(f.glob("*.pte"))), None)
    if folder is None:
        pytest.skip(f"{model_dir}: no export folder with a .pte")
    model = provision_model(transport, folder)
    result = QnnExecutorRunner(transport, qnn_runtime, model.remote_dir).run(next(iter(model.configs.values())),
                                                                               local_dir=tmp_path)
    assert result.ok and "etdump" in result.files, result.to_json()
    etrecord = next(folder.glob("*etrecord*"), None)
    report = analyse_etdump(result.files["etdump"], etrecord, qnn=True)
    device_record.extras["etdump_ops"] = len(report.ops)
    assert report.ops, "the ETDump holds no op rows: was the .pte compiled with profile_level >= 2?"
