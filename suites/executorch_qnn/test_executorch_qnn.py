"""ExecuTorch exports on the device: the quant-format matrix (skipped with the HTP-arch reason
where the format cannot run), the runner's output judged as the real runner prints it, and an
ETDump profile.

    pytest suites/executorch_qnn --device oneplus13 --model-dir ET_EXPORTS --runtime-dir ET_RUNTIME [--qnn-sdk SDK]
    pytest suites/executorch_qnn --device host      # ExecuTorch's real LLM runner on the CPU

ET_EXPORTS holds one folder per format (16a4w/, 16a8w/, 8a8w/, 16a4w_block/ ... and CPU exports
such as xnnpack/), each an ExecuTorch export (.pte + tokenizer), or is one export itself. On the
host (no HTP, no --runtime-dir) the runner is `harness.hostrt.executorch` (the `executorch` extra)
and the default export is ../shared's tiny XNNPACK llama; QNN formats skip there with the reason.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from harness.outcomes import FailureClass
from harness.pairs import Backend, BackendPair
from harness.provision import provision_model
from harness.runners.etdump import analyse_etdump, executorch_available
from harness.runners.executorch import LlamaRunConfig, QnnExecutorRunner, QnnLlamaRunner, observer_metrics
from harness.runners.quant_matrix import QUANT_FORMATS, skip_reason
from suites.executorch_qnn.conftest import host_lane

PROMPT = "What is the capital of France? Answer briefly."
HOST_SEQ_LEN = 48  # the tiny model's context is 128


def _tokenizer(folder: Path) -> str:
    for name in ("tokenizer.json", "tokenizer.model", "tokenizer.bin"):
        if (folder / name).is_file():
            return name
    pytest.fail(f"{folder}: no tokenizer (tokenizer.json / .model / .bin) next to the .pte", pytrace=False)


def _run(transport, runtime, folder: Path, name: str, tmp_path: Path, *, seq_len: int = 128,
         extra_env: dict[str, str] | None = None):
    model = provision_model(transport, folder, name=name)
    cfg = LlamaRunConfig(model_path=next(iter(model.configs.values())), tokenizer_path=_tokenizer(folder),
                         prompts=(PROMPT,), seq_len=seq_len)
    return model, QnnLlamaRunner(transport, runtime, model.remote_dir).run(cfg, local_dir=tmp_path, extra_env=extra_env)


def _judge(result, label: str, device_record) -> None:
    """The run as the real runner reports it: class, its own numbers adding up, some text."""
    assert result.ok, f"{label}: the runner failed ({result.classification.cls}): {result.classification.errors[:3]}"
    assert not result.problems, f"{label}: the runner's numbers do not add up: {result.problems}"
    metrics = observer_metrics(result.stats or {})
    device_record.prefill_tps = metrics.get("prefill_tok_s")
    device_record.decode_tps = metrics.get("decode_tok_s")
    device_record.extras["produced_tokens"] = metrics.get("produced_tokens")
    assert result.text.strip(), f"{label}: no text (outputs.txt or stdout)"


@pytest.mark.qnn
@pytest.mark.parametrize("quant", QUANT_FORMATS)
def test_quant_format_runs(quant: str, device, transport, et_runtime, et_exports, device_record, tmp_path) -> None:
    """qnn_llama_runner answers with each quant format the device's HTP arch supports."""
    if not device.has_htp:
        pytest.skip(f"{quant} is a QNN format: {device.name} has no HTP (the host); the CPU exports run in "
                    "test_cpu_export_runs")
    reason = skip_reason(quant, device.htp_arch)
    if reason:
        pytest.skip(f"{quant} on {device.name} ({device.htp_arch}): {reason}")
    if quant not in et_exports:
        pytest.skip(f"no export for {quant} (no {quant}/ folder with a .pte)")
    model, result = _run(transport, et_runtime, et_exports[quant], f"et-{quant}", tmp_path)
    device_record.backend_pair = BackendPair(Backend.QNN, variant=quant)
    device_record.model = model.model_type
    _judge(result, quant, device_record)


def _cpu_exports(et_exports: dict[str, Path]) -> dict[str, Path]:
    from harness.provision.artifacts import load_export

    return {name: f for name, f in et_exports.items() if name not in QUANT_FORMATS and not load_export(f).uses_qnn}


def test_cpu_export_runs(device, transport, et_runtime, et_exports, device_record, tmp_path) -> None:
    """Exports for the CPU (XNNPACK, portable) run with the runner's own numbers adding up."""
    cpu = _cpu_exports(et_exports)
    if not cpu:
        pytest.skip("no CPU export (a .pte without QnnBackend) in --model-dir")
    for name, folder in cpu.items():
        model, result = _run(transport, et_runtime, folder, f"et-{name}", tmp_path / name, seq_len=HOST_SEQ_LEN)
        device_record.backend_pair = BackendPair(Backend.CPU, variant=name)
        device_record.model = model.model_type
        _judge(result, name, device_record)
        assert result.text.startswith(PROMPT), f"{name}: the runner echoes the prompt first: {result.text[:80]!r}"
        limit = result.output.limits[-1]["max_new_tokens"] if result.output and result.output.limits else None
        produced = observer_metrics(result.stats or {})["produced_tokens"]
        assert limit is None or produced <= limit, f"{name}: {produced} tokens produced over the limit {limit}"


def test_load_failure_is_classified(pytestconfig, device, transport, et_runtime, et_exports, tmp_path) -> None:
    """The real runner without the LLM custom-op kernels registered: the load fails, and the
    run is classified by its real signature (the missing operator, then the method load)."""
    if not host_lane(pytestconfig, device):
        pytest.skip("only the host runner can leave ExecuTorch's custom ops out (HARNESS_ET_CUSTOM_OPS=0)")
    cpu = _cpu_exports(et_exports)
    if not cpu:
        pytest.skip("no CPU export in --model-dir")
    from harness.hostrt.executorch import CUSTOM_OPS_ENV

    name, folder = next(iter(cpu.items()))
    _, result = _run(transport, et_runtime, folder, f"et-{name}", tmp_path, seq_len=HOST_SEQ_LEN,
                     extra_env={CUSTOM_OPS_ENV: "0"})
    cls = result.classification
    assert result.exit_code == 1 and cls.cls == FailureClass.INIT_ERROR, result.to_json()
    assert cls.primary is not None and cls.primary.signature.id == "et-missing-operator", cls.to_json()
    assert "et-method-load-failed" in cls.signature_ids
    assert any("llama::custom_sdpa.out" in e for e in cls.errors), cls.errors[:5]


def _host_etdump(transport, folder: Path, out: Path) -> dict:
    """A real ETDump of the export on the host: 1 prefill + 4 decode calls (hostrt.executorch_etdump)."""
    repo = str(Path(__file__).resolve().parents[2])
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH", "")]))}
    res = transport.shell([sys.executable, "-m", "harness.hostrt.executorch_etdump", "--model_path",
                           str(next(folder.glob("*.pte"))), "--tokenizer_path", str(folder / _tokenizer(folder)),
                           "--prompt", PROMPT, "--decode_tokens", "4", "--etdump_path", str(out)], timeout=600, env=env)
    assert res.exit_code == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_etdump_profile(pytestconfig, device, transport, et_runtime, et_exports, tmp_path, device_record,
                        record_property, request) -> None:
    """A real ETDump, analysed per op with ExecuTorch's Inspector: delegated ops and their
    backend, the non-delegated rest by time, ops that cost nothing, prefill vs decode."""
    if not executorch_available():
        pytest.skip("the optional `executorch` extra is not installed: pip install 'harness[executorch]'")
    if host_lane(pytestconfig, device):
        cpu = _cpu_exports(et_exports)
        if not cpu:
            pytest.skip("no CPU export in --model-dir")
        name, folder = next(iter(cpu.items()))
        run = _host_etdump(transport, folder, tmp_path / "host.etdp")
        etdump, qnn, prefill_calls = Path(run["etdump"]), False, run["prefill_calls"]
        calls = run["prefill_calls"] + run["decode_calls"]
    else:
        found: Path | None = next(iter(et_exports.values()), None)
        if found is None:
            pytest.skip("no export folder with a .pte")
        model = provision_model(transport, found)
        result = QnnExecutorRunner(transport, request.getfixturevalue("qnn_runtime"), model.remote_dir).run(
            next(iter(model.configs.values())), local_dir=tmp_path)
        assert result.ok and "etdump" in result.files, result.to_json()
        etdump, qnn, prefill_calls, calls = result.files["etdump"], True, 1, None
    etrecord = next(folder.glob("*etrecord*"), None)
    report = analyse_etdump(etdump, etrecord, qnn=qnn, prefill_calls=prefill_calls)
    summary = report.to_json()
    device_record.extras["etdump"] = {k: summary[k] for k in ("unit", "calls", "ops", "delegated", "backends",
                                                                "not_delegated", "zero_cost", "zero_cost_decode",
                                                                "phases", "method")}
    for key in ("calls", "ops", "delegated"):
        record_property(f"etdump_{key}", summary[key])
    record_property("etdump_backends", ",".join(summary["backends"]))
    record_property("etdump_top_not_delegated", summary["not_delegated"][0] if summary["not_delegated"] else "")
    assert report.ops, "the ETDump holds no op rows: was the .pte compiled with profiling (QNN profile_level >= 2)?"
    if calls is not None:
        assert report.calls == calls, f"{report.calls} calls in the ETDump, {calls} made"
        phases = summary["phases"]
        assert phases["prefill"] > 0 and phases["decode"] > 0, phases
    if etrecord is not None and report.delegated:
        assert all(r.backend for r in report.delegated), "delegated ops without a backend despite the ETRecord"
    if calls is not None:  # the host's XNNPACK llama: the LLM custom ops are never delegated
        assert "llama::custom_sdpa.out" in summary["not_delegated"], summary["not_delegated"][:10]
