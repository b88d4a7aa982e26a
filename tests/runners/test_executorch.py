"""ExecuTorch runners (virtual qnn_llama_runner / qnn_executor_runner on the local host),
the quant-format matrix and the ETDump analysis."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path

import pytest
from runner_helpers import SM8750_ENV, local_device

from harness.errors import HarnessError
from harness.provision import ProvisionedRuntime
from harness.runners import QUANT_FORMATS, plan_matrix, skip_reason, weight_sharing_supported
from harness.runners.executorch import (
    LlamaRunConfig,
    QnnExecutorRunner,
    QnnLlamaRunner,
    analyse_rows,
    executorch_available,
    format_table,
    observer_metrics,
    parse_inference_speed,
    parse_observer,
)
from virtual_lab.runtime import make_runtime_dir

# executorch-qnn.md §1 (the captured line, with its two elided values filled in)
OBSERVER = ('PyTorchObserver {"prefill_token_per_sec":1111.11,"decode_token_per_sec":19000,"prompt_tokens":10,'
            '"generated_tokens":19,"model_load_start_ms":1796206522449,"model_load_end_ms":1796206522450,'
            '"inference_start_ms":1796206522450,"inference_end_ms":1796206522460,"model_execution_start_ms":1796206522450,'
            '"model_execution_end_ms":1796206522460,"prompt_eval_end_ms":1796206522459,"first_token_ms":1796206522459,'
            '"aggregate_sampling_time_ms":0,"aggregate_model_execution_time_ms":9,"SCALING_FACTOR_UNITS_PER_SECOND":1000}')


def test_observer_line():
    stats = parse_observer("I 00:00:01 executorch: loading\n" + OBSERVER + "\nI 00:00:02 done\n")
    assert stats["prompt_tokens"] == 10 and stats["generated_tokens"] == 19
    m = observer_metrics(stats)
    assert m["prefill_s"] == pytest.approx(0.009) and m["decode_s"] == pytest.approx(0.001)
    assert parse_observer("PyTorchObserver {not json}\n") is None
    assert parse_inference_speed("19.000000") == 19.0 and parse_inference_speed("") is None


def test_llama_flags_are_the_real_ones():
    cfg = LlamaRunConfig(model_path="kv_llama_qnn.pte", tokenizer_path="tokenizer.json", prompts=("a b", "c"),
                         decoder_model_version="qwen3", seq_len=256, eval_mode=1)
    argv = cfg.argv("./qnn_llama_runner", "/ws/outputs/outputs.txt", "/ws/outputs/inference_speed.txt")
    assert "--kv_updater" not in argv
    assert argv[argv.index("--prompt") + 1] == "a b" and argv.count("--prompt") == 2
    assert argv[argv.index("--seq_len") + 1] == "256" and "--shared_buffer" in argv
    with pytest.raises(HarnessError, match="eval_mode 0"):
        LlamaRunConfig(model_path="m", tokenizer_path="t", prompts=("x",), dump_logits_path="l.bin")
    with pytest.raises(HarnessError, match="not both"):
        LlamaRunConfig(model_path="m", tokenizer_path="t", prompts=("x",), tokenized_prompt="ids.bin")


@pytest.fixture
def et_device(tmp_path):
    t = local_device(tmp_path / "device")
    rt = make_runtime_dir(tmp_path / "rt", "v79", kind="executorch")
    ws = posixpath.join(t.device.work_dir, "ws")
    t.push_tree(rt, ws)  # ExecuTorch pushes runner, libraries and model into one workspace
    for name in ("qnn_llama_runner", "qnn_executor_runner"):
        t.shell(["chmod", "755", posixpath.join(ws, name)], timeout=30, check=True)
    (Path(ws) / "kv_llama_qnn.pte").write_bytes(b"PTE fake")
    (Path(ws) / "tokenizer.json").write_text("{}")

    def runtime(runner: str) -> ProvisionedRuntime:
        # No env vars, as ExecuTorch's own device command: rpath $ORIGIN finds the libraries.
        return ProvisionedRuntime(device="local", remote_dir=ws, runner=posixpath.join(ws, runner), htp_arch="v79")

    return t, ws, runtime


def test_qnn_llama_runner_is_executorchs_own(et_device, tmp_path):
    """The virtual runner answers nothing itself: ExecuTorch's LLM runner refuses what is not a real
    tokenizer (and program) as it does on a phone (issue 41.3: no canned answers)."""
    t, ws, runtime = et_device
    cfg = LlamaRunConfig(model_path="kv_llama_qnn.pte", tokenizer_path="tokenizer.json",
                         prompts=("What is the capital of France?",))
    res = QnnLlamaRunner(t, runtime("qnn_llama_runner"), ws).run(cfg, local_dir=tmp_path / "out", extra_env=SM8750_ENV)
    assert not res.ok and res.exit_code == 1, res.to_json()
    assert "RuntimeError: Failed to load tokenizer from: tokenizer.json" in res.stderr, res.stderr[-2000:]
    assert "Paris" not in res.stdout


def test_qnn_llama_runner_rejects_kv_updater(et_device):
    t, ws, runtime = et_device
    cfg = LlamaRunConfig(model_path="kv_llama_qnn.pte", tokenizer_path="tokenizer.json", prompts=("x",))
    runner = QnnLlamaRunner(t, runtime("qnn_llama_runner"), ws)
    argv = cfg.argv(runner.runtime.runner, "o.txt", "s.txt") + ["--kv_updater", "SmartMask"]
    res, _ = runner._exec(argv, 60, SM8750_ENV, expect_observer=True)
    assert res.exit_code == 1 and res.classification.cls == "init-error"
    assert res.classification.primary.signature.id == "et-unknown-flag"


def test_qnn_llama_runner_without_the_arch_libraries(et_device):
    t, ws, runtime = et_device
    cfg = LlamaRunConfig(model_path="kv_llama_qnn.pte", tokenizer_path="tokenizer.json", prompts=("x",))
    # The workspace holds v79 Stub/Skel; an SM8650 (v75) finds none for its arch.
    res = QnnLlamaRunner(t, runtime("qnn_llama_runner"), ws).run(cfg, extra_env={"VLAB_SOC_MODEL": "SM8650"})
    assert res.classification.cls == "qnn-library-missing"


def test_qnn_executor_runner_loads_the_program_with_executorch(et_device, tmp_path):
    """No placeholder ETDump: a file that is not a program is refused by ExecuTorch's loader (the real
    run and its ETDump: tests/runners/test_localize_device.py)."""
    t, ws, runtime = et_device
    res = QnnExecutorRunner(t, runtime("qnn_executor_runner"), ws).run("kv_llama_qnn.pte", local_dir=tmp_path / "o",
                                                                       extra_env=SM8750_ENV)
    assert not res.ok and res.exit_code == 1, res.to_json()
    assert "RuntimeError" in res.stderr and "etdump" not in res.files, res.stderr[-2000:]


def test_quant_matrix_formats_and_weight_sharing():
    # which cells an arch skips is QNN's measured answer: tests/runners/test_arch_limits.py
    assert skip_reason("use_16a4w", "79") is None
    assert [c.id for c in plan_matrix(["8a8w"], [("sa8295", "v68")])] == ["sa8295-8a8w"]
    assert len(QUANT_FORMATS) == 8
    assert not weight_sharing_supported("v69") and weight_sharing_supported("v73")
    with pytest.raises(HarnessError, match="not one of"):
        skip_reason("4a4w", "v79")


def _row(name, raw, delegated=True, op_types=(), backend="QnnBackend", unit="cycles"):
    return {"event_block_name": "Execute", "event_name": name, "raw": list(raw), f"p50 ({unit})": sorted(raw)[len(raw) // 2],
            "op_types": list(op_types), "is_delegated_op": delegated, "delegate_backend_name": backend}


def test_etdump_analysis_on_inspector_rows():
    # Merged rows: one value per call, call 0 = prefill, calls 1..3 = decode (executorch-qnn.md B3).
    rows = [
        _row("q_proj:qnn_conv2d", [900, 100, 100, 100]),
        _row("aten_to_copy_default:qnn_convert", [300, 30, 30, 30], op_types=["aten._to_copy.default"]),
        _row("reshape:qnn_reshape", [0, 0, 0, 0]),
        _row("native_call_update_cache.out", [50, 50, 50, 50], delegated=False, backend=None),
        _row("Method::execute", [2000, 300, 300, 300], delegated=False, backend=None),
    ]
    rep = analyse_rows(rows, prefill_calls=1)
    assert rep.unit == "cycles"
    assert [r.name for r in rep.not_delegated] == ["native_call_update_cache.out"]
    assert [r.name for r in rep.zero_cost_ops] == ["reshape:qnn_reshape"]
    assert rep.copy_share() == pytest.approx(390 / (1200 + 390 + 200))
    assert rep.phase_totals() == {"prefill": 1250.0, "decode": 540.0}
    top = rep.table(1)[0]
    assert top["name"] == "q_proj:qnn_conv2d" and top["prefill (cycles)"] == 900 and top["decode (cycles)"] == 300
    assert "q_proj" in format_table(rep)
    json.dumps(rep.to_json(), allow_nan=False)


def test_etdump_from_a_real_executorch_run(tmp_path):
    """A real ETDump made by ExecuTorch on the host (portable kernels, no QNN), read by its Inspector."""
    if not executorch_available():
        pytest.skip("the optional `executorch` extra is not installed (pip install 'harness[executorch]'; "
                    "heavy: torch + executorch), so no real ETDump can be made here")
    import torch
    from executorch.exir import to_edge_transform_and_lower
    from executorch.extension.pybindings.portable_lib import _load_for_executorch

    from harness.runners.executorch import analyse_etdump

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.softmax(self.lin(x).to(torch.float16).to(torch.float32), dim=-1)

    ep = torch.export.export(Tiny(), (torch.randn(1, 8),))
    prog = to_edge_transform_and_lower(ep, generate_etrecord=True).to_executorch()
    pte = tmp_path / "tiny.pte"
    pte.write_bytes(prog.buffer)
    etrecord = tmp_path / "etrecord.bin"
    prog.get_etrecord().save(str(etrecord))
    # No debug buffer: with one, ExecuTorch 1.5.1's own flatc cannot decode the dump (observed).
    module = _load_for_executorch(str(pte), enable_etdump=True)
    for _ in range(3):
        module.forward((torch.randn(1, 8),))
    etdump = tmp_path / "tiny.etdp"
    module.write_etdump_result_to_file(str(etdump), str(tmp_path / "debug.bin"))
    rep = analyse_etdump(etdump, etrecord, qnn=False, prefill_calls=1)
    assert rep.ops and not rep.delegated  # portable kernels only
    assert any(r.is_copy for r in rep.ops)  # the two dtype casts
    assert all(len(r.raw) == 3 for r in rep.ops)
