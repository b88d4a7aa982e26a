"""MNN's real llm_demo (x86_64 build of MNN's public source) through the harness, on the host
as a `local` device and on a virtual adb phone: a CPU-only runtime from a build tree, the CPU
pair of the matrix and its checks on a real engine, and the failures a user meets, each
classified (missing library by name, missing weight, timeout with its output, SIGSEGV)."""

from __future__ import annotations

import posixpath
import signal
import uuid

import pytest

from harness import pipeline
from harness.errors import ArtifactError
from harness.pairs import BackendPair
from harness.provision import provision_model, provision_runtime, resolve_runtime
from harness.runners import Overlay, Prompt, PromptCase, default_cases
from harness.runners.llm_demo import OUTPUT_FILES
from tests.pipeline.cellkit import cell_record, cell_records
from tests.real_runtime.realrt import CMAKE_FILES, REAL_EXPORT, RUNTIME_FILES, make_build_tree, signal_own_process_later

pytestmark = pytest.mark.slow  # tens of seconds: tests/conftest.py starts slow files early

CAT = "Describe a cat in two sentences."


def _device_files(real, remote_dir: str) -> set[str]:
    res = real.transport.shell(["ls", remote_dir], timeout=60, check=True)
    return set(res.stdout.split())


# ---- the runtime ---------------------------------------------------------------------------

def test_build_tree_bundle_takes_the_runner_and_its_libraries(build_tree) -> None:
    b = resolve_runtime(build_tree, None, need_qnn=False)
    assert {f.rel for f in b.files} == set(RUNTIME_FILES)  # express/libMNN_Express.so found by NEEDED
    assert next(f for f in b.files if f.rel == "libMNN_Express.so").path == build_tree / "express/libMNN_Express.so"
    assert not b.qnn and b.htp_arch == ""
    # What the host's system must provide (glibc, libstdc++), never a build-system file.
    assert {"libc.so.6", "libstdc++.so.6"} <= set(b.system_needed)
    assert "/lib/x86_64-linux-gnu" in b.system_dirs


def test_cpu_runtime_is_pushed_without_qnn_or_build_files(real) -> None:
    assert not real.runtime.qnn and posixpath.basename(real.runtime.remote_dir) == "llm_demo-cpu"
    on_device = _device_files(real, real.runtime.remote_dir)
    assert on_device == set(RUNTIME_FILES)
    assert not on_device & {posixpath.basename(n) for n in CMAKE_FILES}
    assert "ADSP_LIBRARY_PATH" not in real.runtime.env()


def test_missing_library_refused_before_a_byte_moves(real, tmp_path) -> None:
    tree = make_build_tree(tmp_path / "build", drop=("libMNN_Express.so",))
    with pytest.raises(ArtifactError) as err:
        provision_runtime(real.transport, tree, need_qnn=False, name="llm_demo-no-express")
    msg = str(err.value)
    assert "libMNN_Express.so" in msg and "needed by" in msg and real.device.name in msg
    assert not real.transport.exists(posixpath.join(real.device.work_dir, "runtimes", "llm_demo-no-express"))


# ---- the CPU pair of the matrix and its checks ---------------------------------------------

@pytest.fixture(scope="session")
def cpu_matrix(real):
    runner = real.runner()
    cases = default_cases(visual=False)
    runs = pipeline.run_matrix(runner, cases, [BackendPair.parse("cpu")], max_new_tokens=64)
    judged = pipeline.judge_matrix(runs, cases)
    records = cell_records(runs, judged, provisioned=real.model, device=real.device.name, soc_model=real.device.soc_model,
                           htp_arch=real.device.htp_arch, model=real.model.model_type)
    runner.cleanup()
    return runs, {j.case.id: j for j in judged}, {case: r for (_, case), r in records.items()}


def test_france_is_answered_coherently(cpu_matrix) -> None:
    runs, judged, records = cpu_matrix
    proc = runs["cpu"].result.runs[0]
    assert proc.classification.ok, proc.stdout + proc.stderr
    assert judged["france"].text == "The capital of France is Paris."
    assert judged["france"].verdict.coherent
    s = proc.parsed.summary
    assert s.prompt_tokens == 40 and s.decode_tokens == 8  # 7 words + EOS
    assert proc.parsed.prompts[0].stopped_on_eos is True
    rec = records["france"]
    assert rec.status == "passed" and rec.verdict == "coherent" and rec.duration_s > 0
    assert rec.duration_s == pytest.approx(proc.wall_s)


def test_greedy_cat_loop_is_judged_garbled(cpu_matrix) -> None:
    runs, judged, records = cpu_matrix
    proc = runs["cpu"].result.runs[1]
    assert proc.classification.ok  # the engine ran fine: the text is what fails
    assert proc.parsed.summary.decode_tokens == 64
    assert proc.parsed.prompts[0].stopped_on_eos is False  # it hit the 64-token limit
    assert not judged["cat"].verdict.coherent
    rec = records["cat"]
    assert rec.status == "failed" and rec.failure_class == "garbled" and rec.verdict == judged["cat"].verdict.verdict
    assert rec.duration_s == pytest.approx(proc.wall_s) and rec.text


# ---- failures, classified -------------------------------------------------------------------

def test_loader_failure_is_classified_by_library_name(real) -> None:
    runtime = provision_runtime(real.transport, real.build_tree, need_qnn=False, name="llm_demo-broken")
    real.transport.remove(posixpath.join(runtime.remote_dir, "libMNN_Express.so"))  # lost on the device
    from harness.runners.llm_demo import LlmDemoRunner

    result = LlmDemoRunner(real.transport, runtime, real.model).run(["Hi"], backend="cpu")
    proc = result.runs[0]
    assert result.failure_class == "library-missing", proc.stderr
    assert "libMNN_Express.so" in proc.classification.reason and "libMNN_Express.so" in proc.classification.hint
    assert proc.exit_code == 127
    kept = real.transport.read_small_files([posixpath.join(proc.run_dir, "stderr.txt")])
    assert b"libMNN_Express.so" in (next(iter(kept.values())) or b"")


def test_missing_weight_is_an_init_error(real) -> None:
    from harness.provision import remove_set
    from harness.runners.llm_demo import LlmDemoRunner

    model = provision_model(real.transport, REAL_EXPORT, name="smollm2-no-weight")  # hard links: no bytes
    try:
        real.transport.remove(posixpath.join(model.remote_dir, "llm.mnn.weight"))
        result = LlmDemoRunner(real.transport, real.runtime, model).run(["Hi"], backend="cpu")
        cls = result.runs[0].classification
        assert cls is not None and cls.primary is not None
        assert result.failure_class == "init-error" and cls.primary.signature.id == "file-not-found"
        assert result.runs[0].exit_code == 0  # llm_demo exits 0 after LLM init error
        assert "llm.mnn.weight" in cls.hint and "tokenizer" not in cls.hint
    finally:
        remove_set(real.transport, "model", "smollm2-no-weight")


def test_timeout_keeps_the_partial_output(real, cpu_matrix) -> None:
    runs, _, _ = cpu_matrix
    # Long enough to load and print text, far too short for ~2000 greedy tokens (a minute or more).
    timeout = 5 + 2 * runs["cpu"].result.runs[0].wall_s
    case = PromptCase(Prompt(CAT, id="cat-long"))
    runner = real.runner()
    cpu = BackendPair.parse("cpu")
    hung = pipeline.run_matrix(runner, [case], [cpu], max_new_tokens=4000, timeout=timeout)
    proc = hung[cpu].result.runs[0]
    assert proc.timed_out and proc.classification.cls == "timeout"
    assert "prompt file is" in proc.stdout
    text = proc.parsed.texts[0]
    assert text and "cat" in text.lower()  # what it printed before it was killed
    rec = cell_record(hung, pipeline.judge_matrix(hung, [case])[0], provisioned=real.model, device=real.device.name)
    assert rec.failure_class == "timeout" and rec.text == text and rec.log_excerpt
    kept = real.transport.read_small_files([posixpath.join(proc.run_dir, n) for n in OUTPUT_FILES[:2]])
    stdout_kept = kept[posixpath.join(proc.run_dir, "stdout.txt")] or b""
    assert text.encode() in stdout_kept


def test_sigsegv_is_a_crash(real) -> None:
    token = uuid.uuid4().hex
    killer = signal_own_process_later(token, signal.SIGSEGV, after_s=0.5)
    result = real.runner().run([CAT], backend="cpu", overlay=Overlay(greedy=True, max_new_tokens=4000),
                               timeout=600, extra_env={"HARNESS_TEST_TOKEN": token})
    killer.join(timeout=5)
    proc = result.runs[0]
    assert proc.exit_code == 128 + signal.SIGSEGV
    assert result.failure_class == "crash" and "SIGSEGV" in proc.classification.reason
