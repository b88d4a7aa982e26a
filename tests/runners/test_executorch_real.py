"""The ExecuTorch runner contract on REAL captures of ExecuTorch's LLM runner (fixtures/executorch:
the 1.5.1 wheel's TextLLMRunner through harness.hostrt.executorch on ../shared's tiny XNNPACK
llama), the classify CLI on them, and the virtual qnn_llama_runner (ExecuTorch itself) on a real QNN program."""

from __future__ import annotations

import json
import posixpath
import re
import subprocess
import sys
from pathlib import Path

import pytest
from runner_helpers import local_device

from harness.provision import ProvisionedRuntime
from harness.runners import load_signatures
from harness.runners.executorch import LOG_LINE, LlamaRunConfig, QnnLlamaRunner, observer_metrics, parse_run
from virtual_lab.runtime import make_runtime_dir

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "fixtures" / "executorch"
ETRECORD = REPO.parent / "shared" / "models" / "et-tiny-llama-xnnpack" / "etrecord.bin"


def capture(name: str) -> tuple[str, str]:
    return ((CAPTURES / f"{name}.stdout").read_text(encoding="utf-8"),
            (CAPTURES / f"{name}.stderr").read_text(encoding="utf-8"))


def test_real_run_counts_spans_and_summary() -> None:
    run = parse_run(*capture("run-ok"))
    assert run.problems == []
    assert run.stats is not None
    m = observer_metrics(run.stats)
    # "Max new tokens resolved: 30" and 30 produced: the runner's generated_tokens says 29.
    assert run.limits[0]["max_new_tokens"] == 30 and m["generated_tokens"] == 29 and m["produced_tokens"] == 30
    assert m["prompt_tokens"] == run.limits[0]["num_prompt_tokens"] == 10  # the tokenizer's exact count
    assert m["decode_tok_s"] is not None and m["last_call_s"] < m["inference_s"]  # one call, not the decode
    assert run.summaries[0]["lines"] == 7 and run.summaries[0]["generated_tokens"] == 29
    assert run.texts[0].startswith("Once upon a time")  # the prompt is echoed
    # every stderr line is `[file:N] message` but the tokenizer library's own
    assert run.other_stderr == ["I tokenizers:regex.cpp:40] Registering override fallback regex"]
    assert {log.file for log in run.log} >= {"llm_runner_helper.cpp", "text_llm_runner.cpp", "stats.h"}


def test_real_run_with_one_token_has_no_decode_rate() -> None:
    run = parse_run(*capture("run-one-token"))
    assert run.problems == []
    assert run.stats is not None
    m = observer_metrics(run.stats)
    assert m["generated_tokens"] == 0 and m["produced_tokens"] == 1 and m["decode_tok_s"] is None
    assert "decode_token_per_sec" not in run.stats and m["decode_s"] == 0


def test_the_checks_catch_what_the_old_virtual_runner_printed() -> None:
    out, err = capture("run-ok")
    counted_all = out.replace('"generated_tokens":29', '"generated_tokens":30')
    assert any("over the resolved limit 30" in p for p in parse_run(counted_all, err).problems)
    plus_eight = out.replace('"prompt_tokens":10', '"prompt_tokens":18')
    assert any("num_prompt_tokens 10" in p for p in parse_run(plus_eight, err).problems)
    one_line = "\n".join(x for x in err.splitlines() if not x.startswith("[stats.h:1") or "175" in x)
    assert any("7" in p for p in parse_run(out, one_line).problems)


def test_real_load_failure_signature() -> None:
    out, err = capture("run-no-custom-ops")
    cls = load_signatures().classify(stdout=out, stderr=err, exit_code=1)
    assert cls.primary is not None
    assert cls.cls == "init-error" and cls.primary.signature.id == "et-missing-operator"
    assert cls.signature_ids == ["et-missing-operator", "et-method-load-failed", "et-generation-failed"]
    assert "[method.cpp:822] Missing operator: [16] llama::custom_sdpa.out" in cls.errors


# The Qualcomm AOT side's real errors without the SDK (docs/executorch-runner.md#the-real-runners-output).
QNN_SDK_ERRORS = {
    "RuntimeError: Failed to set up QNN SDK.": "et-qnn-sdk-setup",
    "Cannot Open QNN library libQnnHtp.so, with error: libQnnHtp.so: cannot open shared "
    "object file: No such file or directory": "et-qnn-libs-missing",
    "RuntimeError: Failed to initialize QNN backend for kHtpBackend. Ensure QNN SDK libraries are available (e.g. "
    "LD_LIBRARY_PATH includes $QNN_SDK_ROOT/lib/x86_64-linux-clang/).": "et-qnn-backend-init",
}


@pytest.mark.parametrize("line", list(QNN_SDK_ERRORS))
def test_qualcomm_sdk_errors_have_their_signatures(line: str) -> None:
    cls = load_signatures().classify(stderr="Traceback (most recent call last):\n" + line + "\n", exit_code=1)
    assert cls.primary is not None
    assert cls.cls == "qnn-library-missing" and cls.primary.signature.id == QNN_SDK_ERRORS[line]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.runners.executorch", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_classify_cli_on_real_captures() -> None:
    ok = _cli(str(CAPTURES / "run-ok.stdout"), "--stderr", str(CAPTURES / "run-ok.stderr"), "--json")
    assert ok.returncode == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert data["class"] == "ok" and data["stats"]["generated_tokens"] == 29 and data["problems"] == []
    assert data["runs"][0]["metrics"]["produced_tokens"] == 30
    bad = _cli(str(CAPTURES / "run-no-custom-ops.stdout"), "--stderr", str(CAPTURES / "run-no-custom-ops.stderr"),
               "--exit-code", "1", "--json")
    data = json.loads(bad.stdout)
    assert data["class"] == "init-error" and data["signature"] == "et-missing-operator" and data["stats"] is None
    text = _cli(str(CAPTURES / "run-one-token.stdout"), "--stderr", str(CAPTURES / "run-one-token.stderr")).stdout
    assert text.startswith("class: ok") and "decode absent (0 ms span)" in text
    # stdout alone, no stats line: the runner stopped before its report
    assert json.loads(_cli(str(CAPTURES / "run-no-custom-ops.stdout"), "--json").stdout)["class"] == "runtime-error"


def _shape(message: str) -> str:
    """A log message with its numbers and the text in it replaced: the format, not the values."""
    return re.sub(r"\d+(\.\d+)?", "N", message)


def _observer_keys(stdout: str) -> list[str]:
    found = re.search(r"^PyTorchObserver (\{.*\})$", stdout, re.M)
    assert found is not None, "no PyTorchObserver line"
    return list(json.loads(found[1]))


@pytest.mark.real_qnn
@pytest.mark.slow
def test_the_virtual_runner_is_executorchs_runner_on_a_real_program(tmp_path: Path) -> None:
    """Issue 41.3: the virtual phone's qnn_llama_runner runs the pushed program on ExecuTorch (the host's
    HTP emulator): its text is what the host's runner gives for the same program and prompt, and it
    prints what the real runner prints (the real capture's PyTorchObserver keys and stats lines)."""
    import os

    from tests.localize_kit import host_env
    from tests.qnn.material import et_qnn_or_skip

    env = host_env()  # skips without the qnn extra
    pte, tok = et_qnn_or_skip("llm", "kv-16a8w-sm8650.pte"), et_qnn_or_skip("llm", "tokenizer.json")
    t = local_device(tmp_path / "device", soc="SM8650")
    ws = posixpath.join(t.device.work_dir, "ws")
    t.push_tree(make_runtime_dir(tmp_path / "rt", "v75", kind="executorch"), ws)
    t.shell(["chmod", "755", posixpath.join(ws, "qnn_llama_runner")], timeout=30, check=True)
    for f in (pte, tok):
        (Path(ws) / f.name).write_bytes(f.read_bytes())
    runtime = ProvisionedRuntime(device="local", remote_dir=ws, runner=posixpath.join(ws, "qnn_llama_runner"), htp_arch="v75")
    cfg = LlamaRunConfig(model_path=pte.name, tokenizer_path=tok.name, prompts=("Once upon a time",), seq_len=32)
    virtual = QnnLlamaRunner(t, runtime, ws).run(cfg, local_dir=tmp_path / "out", extra_env={"VLAB_SOC_MODEL": "SM8650"})
    assert virtual.ok and virtual.problems == [], virtual.to_json()
    host = subprocess.run([sys.executable, "-m", "harness.hostrt.executorch", "--model_path", str(pte), "--tokenizer_path",
                           str(tok), "--prompt", "Once upon a time", "--seq_len", "32"], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=600, check=False)
    assert host.returncode == 0, host.stderr[-2000:]
    assert virtual.output is not None and virtual.output.texts == parse_run(host.stdout, host.stderr).texts
    real_out, real_err = capture("run-ok")
    assert _observer_keys(virtual.stdout) == _observer_keys(real_out)
    real_stats = [(m["file"], m["line"]) for x in real_err.splitlines() if (m := LOG_LINE.match(x)) and m["file"] == "stats.h"]
    assert [(m["file"], m["line"]) for x in virtual.stderr.splitlines()
            if (m := LOG_LINE.match(x)) and m["file"] == "stats.h"] == real_stats


@pytest.mark.slow
def test_etdump_cli_on_a_real_etdump() -> None:
    pytest.importorskip("executorch.devtools", reason="the ETDump CLI reads with ExecuTorch's Inspector: the "
                        "optional `executorch` extra is not installed")
    if not ETRECORD.is_file():
        pytest.skip(f"{ETRECORD} is absent: the ETRecord of the captured run comes from ../shared")
    res = subprocess.run([sys.executable, "-m", "harness.runners.executorch.etdump", str(CAPTURES / "run.etdp"), "--etrecord",
                          str(ETRECORD), "--json"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(res.stdout.strip().splitlines()[-1])
    # the capture: 1 prefill call + 3 decode calls of the tiny llama
    assert data["calls"] == 4 and data["unit"] == "ms" and list(data["backends"]) == ["XnnpackBackend"]
    assert data["delegated"] > 0 and all(d["backend"] == "XnnpackBackend" for d in data["delegated_ops"])
    assert all(d["name"].startswith("Fully Connected") for d in data["delegated_ops"])
    # the LLM custom ops stay outside the delegate; the rest is sorted by measured time (real
    # timings on a shared machine: which op is largest varies from run to run)
    names = [d["name"] for d in data["not_delegated_by_time"]]
    assert {"llama::custom_sdpa.out", "llama::update_cache.out"} <= set(names)
    totals = [d["total"] for d in data["not_delegated_by_time"]]
    assert totals == sorted(totals, reverse=True)
    assert data["phases"]["prefill"] > 0 and data["phases"]["decode"] > 0
    assert data["method"]["prefill"] >= data["phases"]["prefill"] * 0.5
