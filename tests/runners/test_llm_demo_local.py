"""LlmDemoRunner against the virtual llm_demo on the local host (LocalTransport): every failure
class, prompt files and overlays. The same runs through the virtual lab are in test_llm_demo_vlab.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runner_helpers import SM8750_ENV

from harness.errors import HarnessError
from harness.runners import Image, Overlay, Prompt, derived_name, render_prompt_file

FRANCE = "What is the capital of France?"
CAT = "Describe a cat in two sentences."


def behaviour(**prompts):
    return {"default": {"text": "Hello there.", "prefill_ms_per_token": 2.0, "decode_ms_per_token": 25.0},
            "prompts": prompts}


def test_ok_one_prompt_per_process(local_setup):
    s = local_setup()
    runner = s.runner()
    res = runner.run([FRANCE, CAT], backend="qnn", extra_env=SM8750_ENV)
    assert res.failure_class == "ok", res.to_json()
    assert res.texts[0] == "The capital of France is Paris."
    assert res.texts[1].startswith("A cat is a small, furry animal")
    assert len(res.runs) == 2 and all(r.parsed.summary.complete for r in res.runs)
    assert res.summary.prompt_tokens == sum(r.parsed.summary.prompt_tokens for r in res.runs)
    assert res.runs[0].exit_code == 0 and res.runs[0].wall_s > 0
    json.dumps(res.to_json(), allow_nan=False)  # strict JSON
    # The first clean run's folder went with the second's staging; cleanup() takes the last.
    assert len(list(Path(s.transport.device.work_dir, "runs").glob("*"))) == 1
    runner.cleanup()
    assert not list(Path(s.transport.device.work_dir, "runs").glob("*"))
    model_dir = Path(s.model.remote_dir)
    derived = [p for p in model_dir.glob("config_qnn.harness-*.json")]
    assert len(derived) == 1
    assert json.loads(derived[0].read_text())["sampler_type"] == "greedy"
    assert json.loads((model_dir / "config_qnn.json").read_text())["sampler_type"] == "mixed"  # untouched


def test_multi_prompt_process_splits_at_eos(local_setup):
    s = local_setup()
    res = s.runner().run([FRANCE, CAT], backend="cpu", one_per_process=False, extra_env=SM8750_ENV)
    assert res.failure_class == "ok"
    assert res.texts[0] == "The capital of France is Paris." and res.runs[0].parsed.split_exact
    assert len(res.runs) == 1


def test_max_tokens_and_overlay_max_new_tokens(local_setup):
    s = local_setup()
    res = s.runner().run([FRANCE], backend="cpu", max_tokens=3, extra_env=SM8750_ENV)
    assert res.texts == ["The capital of"] and res.prompts[0].stopped_on_eos is False
    assert res.summary.decode_tokens == 3
    res2 = s.runner().run([FRANCE], backend="cpu", overlay=Overlay(max_new_tokens=2), extra_env=SM8750_ENV)
    assert res2.texts == ["The capital"]


def test_init_error_exit_0(local_setup):
    s = local_setup(missing=["llm.mnn.weight"])
    res = s.runner().run([FRANCE], backend="cpu", extra_env=SM8750_ENV)
    assert res.runs[0].exit_code == 0
    assert res.failure_class == "init-error"
    assert any("LLM weight file not found" in e for e in res.errors)
    assert res.texts == [None]
    assert res.runs[0].run_dir and Path(res.runs[0].run_dir).is_dir()  # kept for debugging


def test_qnn_libraries_missing(local_setup):
    s = local_setup(with_qnn_libs=False)
    res = s.runner().run([FRANCE], backend="qnn", extra_env=SM8750_ENV)
    assert res.failure_class == "qnn-library-missing"
    assert res.runs[0].exit_code == 0
    assert res.signature_ids[0] == "qnn-libs-missing"
    assert "libQnnHtp.so" in res.errors[0]
    # The CPU config needs no QNN library.
    assert s.runner().run([FRANCE], backend="cpu", extra_env=SM8750_ENV).ok


def test_adsp_path_with_colons_does_not_find_the_skel(local_setup):
    from dataclasses import replace

    s = local_setup()
    # Skel in its own folder, ADSP_LIBRARY_PATH written ':'-separated: FastRPC splits on ';' only.
    skel_dir = Path(s.runtime.remote_dir) / "dsp"
    skel_dir.mkdir()
    skel = next(Path(s.runtime.remote_dir).glob("libQnnHtpV79Skel.so"))
    skel.rename(skel_dir / skel.name)
    s.runtime = replace(s.runtime, adsp_dirs=(str(skel_dir),))
    assert s.runner().run([FRANCE], backend="qnn", extra_env=SM8750_ENV).ok
    bad = {**SM8750_ENV, "ADSP_LIBRARY_PATH": f"{skel_dir}:/vendor/lib/rfsa/adsp"}
    res = s.runner().run([FRANCE], backend="qnn", extra_env=bad)
    assert res.failure_class == "qnn-library-missing" and "Skel" in res.errors[0]


def test_binary_for_another_arch(local_setup):
    s = local_setup(arch="v75")  # runtime for v75, binaries built for v79 (SM8750)
    res = s.runner().run([FRANCE], backend="qnn", extra_env={"VLAB_SOC_MODEL": "SM8650"})
    assert res.failure_class == "binary-mismatch"
    assert res.errors[0].startswith("QNN: Failed to validate binary:")


def test_shape_error_255_without_max_tokens_and_poison_with(local_setup):
    s = local_setup(behaviour=behaviour(bad={"*": {"fault": "shape_error"}}))
    res = s.runner().run([FRANCE, "a bad prompt", CAT], backend="qnn", one_per_process=False, extra_env=SM8750_ENV)
    run = res.runs[0]
    assert run.exit_code == 255 and res.failure_class == "shape-error"
    assert res.texts[0] == "Hello there." and res.texts[1:] == [None, None]
    assert "Error: Response generation failed due to internal error" in res.errors
    # With max_token_number the process goes on, poisoned: exit 0, summary printed.
    res2 = s.runner().run([FRANCE, "a bad prompt", CAT], backend="cpu", one_per_process=False, max_tokens=64,
                          extra_env=SM8750_ENV)
    assert res2.runs[0].exit_code == 0 and res2.failure_class == "shape-error"
    assert [p.valid for p in res2.prompts] == [True, False, False]
    assert res2.prompts[2].errors == ["[Error]: LLM in error state. Status: 4"]
    assert res2.summary is not None
    # One prompt per process isolates the failure: the third prompt is fine.
    res3 = s.runner().run([FRANCE, "a bad prompt", CAT], backend="cpu", max_tokens=64, extra_env=SM8750_ENV)
    assert [r.classification.cls for r in res3.runs] == ["ok", "shape-error", "ok"]
    assert res3.texts[2] == "Hello there."


def test_chunk_limits_overlay_that_the_graphs_do_not_have(local_setup):
    s = local_setup()
    res = s.runner().run([FRANCE], backend="qnn", overlay=Overlay(chunk_limits=(256, 1)), extra_env=SM8750_ENV)
    assert res.failure_class == "shape-error" and res.signature_ids[0] == "qnn-plugin-shape"
    assert s.runner().run([FRANCE], backend="qnn", overlay=Overlay(chunk_limits=(128, 1)), extra_env=SM8750_ENV).ok


@pytest.mark.parametrize("fault,sig", [("crash", "SIGSEGV"), ("abort", "SIGABRT")])
def test_crash_is_a_real_signal(local_setup, fault, sig):
    s = local_setup(behaviour=behaviour(boom={"*": {"fault": fault}}))
    res = s.runner().run(["boom now please"], backend="cpu", extra_env=SM8750_ENV)
    run = res.runs[0]
    assert res.failure_class == "crash"
    assert run.signal is not None and run.classification.reason == f"killed by {sig}"
    assert res.prompts[0].text == "Hello"  # tokens flushed before the crash are kept


def test_hang_is_killed_on_the_device(local_setup):
    s = local_setup(behaviour=behaviour(stuck={"*": {"fault": "hang"}}))
    t = s.transport
    res = s.runner().run(["stuck forever"], backend="cpu", timeout=3, extra_env=SM8750_ENV)
    assert res.failure_class == "timeout" and res.runs[0].timed_out
    ps = t.shell(["ps", "-eo", "pid,args"], timeout=30).stdout
    hung = [ln for ln in ps.splitlines() if s.runtime.runner in ln]
    assert hung == [], f"virtual llm_demo still running: {hung}"


def test_logcat_only_build_on_a_host_without_logcat(local_setup, tmp_path):
    s = local_setup(logcat_only=True)
    log = tmp_path / "logcat.log"
    res = s.runner().run([FRANCE], backend="qnn", extra_env={**SM8750_ENV, "VLAB_LOGCAT_FILE": str(log)})
    # Text still comes on stdout (std::cout), the summary went to the log: without a logcat
    # slice the run cannot be judged, and the class says why.
    assert res.texts == ["The capital of France is Paris."]
    assert res.failure_class == "runtime-error" and "logcat" in res.runs[0].classification.reason
    assert "#################################" in log.read_text()
    assert res.runs[0].logcat is None


def test_images_are_pushed_with_the_prompt(local_setup, tmp_path):
    s = local_setup(visual=True)
    img = tmp_path / "red.png"
    img.write_bytes(b"\x89PNG fake")
    p = Prompt("Describe the image.", images=(Image(img, 512, 512),))
    res = s.runner().run([p], backend="qnn/qnn", extra_env=SM8750_ENV)
    assert res.ok, res.to_json()
    assert res.texts == ["The image shows a red square on a white background."]
    assert res.summary.values["pixels_mp"] > 0
    line = render_prompt_file([p])
    assert line.startswith(f"<img><hw>512, 512</hw>{Image(img).remote_name()}</img>Describe")


def test_bad_input_is_refused_before_the_device(local_setup):
    s = local_setup()
    r = s.runner()
    with pytest.raises(HarnessError, match="one prompt per line"):
        r.run(["two\nlines"], extra_env=SM8750_ENV)
    with pytest.raises(HarnessError, match="starts with '#'"):
        r.run(["# comment"], extra_env=SM8750_ENV)
    with pytest.raises(HarnessError, match="no config for backend"):
        r.run([FRANCE], backend="npu", extra_env=SM8750_ENV)
    with pytest.raises(HarnessError, match="chunk_limits"):
        Overlay(chunk_limits=(128,))


def test_derived_name_is_stable_and_never_the_original():
    a = derived_name("config_qnn.json", {"sampler_type": "greedy"})
    assert a == derived_name("config_qnn.json", {"sampler_type": "greedy"})
    assert a != derived_name("config_qnn.json", {"sampler_type": "greedy", "max_new_tokens": 8})
    assert a.startswith("config_qnn.harness-") and a.endswith(".json") and a != "config_qnn.json"
    assert Overlay(thread_num=2).changes({"mllm": {"thread_num": 4}})["mllm"]["thread_num"] == 2
