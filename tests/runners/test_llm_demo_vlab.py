"""LlmDemoRunner through the virtual lab: real adb server, emulated adbd, the virtual llm_demo
inside the device sandbox (getprop, logcat, bubblewrap). Every failure class end to end."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from runner_helpers import install

from harness.transport import NO_RETRY, open_transport

FRANCE = "What is the capital of France?"


def behaviour(**prompts):
    return {"default": {"text": "Hello there.", "prefill_ms_per_token": 2.0, "decode_ms_per_token": 25.0},
            "prompts": prompts}


@pytest.fixture
def on_device(vlab, vlab_transport, tmp_path):
    """install(...) on a device of the shared lab, each test under its own remote folder."""
    def make(device: str = "oneplus13", **kw):
        t = vlab_transport(device)
        root = f"{t.device.work_dir}/t-{uuid.uuid4().hex[:8]}"
        return install(t, tmp_path / uuid.uuid4().hex[:6], remote_root=root, **kw)
    return make


def test_ok_with_logcat_slice(on_device):
    s = on_device()
    res = s.runner().run([FRANCE], backend="qnn")
    assert res.ok, res.to_json()
    assert res.texts == ["The capital of France is Paris."]
    run = res.runs[0]
    assert run.parsed.summary_source == "stdout" and run.logcat is not None


def test_logcat_only_build(on_device):
    s = on_device(logcat_only=True)
    res = s.runner().run([FRANCE], backend="qnn")
    run = res.runs[0]
    assert "####" not in run.stdout  # MNN_PRINT went to the device log
    assert run.parsed.summary_source == "logcat" and run.parsed.summary.complete
    assert res.texts == ["The capital of France is Paris."] and res.ok
    assert "MNNJNI" in run.logcat
    # Errors of a logcat-only build are found in logcat too (exit code 0 all the same).
    s2 = on_device(logcat_only=True, missing=["llm.mnn.weight"])
    res2 = s2.runner().run([FRANCE], backend="qnn")
    assert res2.runs[0].exit_code == 0 and res2.failure_class == "init-error"
    assert any("LLM weight file not found" in e for e in res2.errors)
    assert "LLM init error" not in res2.runs[0].stdout


def test_init_error_exits_0(on_device):
    s = on_device(missing=["tokenizer.mtok"])
    res = s.runner().run([FRANCE], backend="cpu")
    assert res.runs[0].exit_code == 0 and res.failure_class == "init-error"
    assert res.errors[0].startswith("[Error]: tokenizer file not found:")


def test_qnn_libs_missing_and_binary_mismatch(on_device):
    res = on_device(with_qnn_libs=False).runner().run([FRANCE], backend="qnn")
    assert res.failure_class == "qnn-library-missing"
    # sm8650-qrd is v75: a v75 runtime finds its libraries, but the context binaries are v79.
    res2 = on_device("sm8650-qrd", arch="v75").runner().run([FRANCE], backend="qnn")
    assert res2.failure_class == "binary-mismatch", res2.to_json()
    # The v79 runtime on that device has the wrong Stub/Skel: libraries missing for v75.
    res3 = on_device("sm8650-qrd", arch="v79").runner().run([FRANCE], backend="qnn")
    assert res3.failure_class == "qnn-library-missing"


def test_poisoned_second_prompt(on_device):
    s = on_device(behaviour=behaviour(**{"second": {"*": {"fault": "poison_next"}}}))
    prompts = [FRANCE, "the second prompt", "the third prompt"]
    res = s.runner().run(prompts, backend="qnn", one_per_process=False, max_tokens=32)
    assert res.runs[0].exit_code == 0 and res.failure_class == "shape-error"
    assert res.texts[0] == "Hello there." and res.prompts[0].valid
    assert not res.prompts[1].valid and not res.prompts[2].valid
    assert res.prompts[2].errors == ["[Error]: LLM in error state. Status: 4"]


def test_segfault_through_adb(on_device):
    s = on_device(behaviour=behaviour(boom={"*": {"fault": "crash"}}))
    res = s.runner().run(["boom"], backend="cpu")
    assert res.failure_class == "crash"
    assert res.runs[0].exit_code == 139 and res.runs[0].signal == 11


def test_hang_is_killed_on_the_device(on_device, vlab_transport):
    s = on_device(behaviour=behaviour(stuck={"*": {"fault": "hang"}}))
    watcher = vlab_transport("oneplus13")
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:  # find the hung program's device pid while it runs
        while not stop.is_set() and not seen:
            out = watcher.shell(["ps", "-eo", "pid,args"], timeout=20).stdout
            seen.extend(int(ln.split()[0]) for ln in out.splitlines() if s.runtime.runner in ln and "ps -eo" not in ln)
            time.sleep(0.2)

    th = threading.Thread(target=watch)
    th.start()
    try:
        res = s.runner().run(["stuck"], backend="cpu", timeout=4)
    finally:
        stop.set()
        th.join()
    assert res.failure_class == "timeout" and res.runs[0].timed_out
    assert seen, "the hung llm_demo was never seen running on the device"
    assert not any(watcher.is_running(pid) for pid in seen)


def test_device_offline_is_a_transport_error(vlab, on_device):
    s = on_device()
    t = open_transport(vlab.inventory.get("oneplus13"), retry=NO_RETRY)
    s.transport = t
    dev = vlab.adb_device("oneplus13")
    dev.faults.offline_for(30)
    try:
        res = s.runner().run([FRANCE], backend="cpu")
    finally:
        dev.faults.clear()
        t.close()
    assert res.failure_class == "transport-error" and res.errors


def test_ssh_board_cpu_run(vlab, tmp_path):
    t = open_transport(vlab.inventory.get("sa8295-car"))
    try:
        s = install(t, tmp_path / "h", arch="v68", remote_root=f"{t.device.work_dir}/t-{uuid.uuid4().hex[:8]}")
        # The Linux board has no getprop: the SoC comes through the environment.
        res = s.runner().run([FRANCE], backend="qnn", extra_env={"VLAB_SOC_MODEL": "SA8295"})
        assert res.failure_class == "binary-mismatch"  # the export's binaries are v79
        ok = s.runner().run([FRANCE], backend="cpu", extra_env={"VLAB_SOC_MODEL": "SA8295"})
        assert ok.ok and ok.runs[0].logcat is None  # no logcat on the board
    finally:
        t.close()
