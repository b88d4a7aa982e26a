"""The signature file: valid, every failure class reachable, known lines classified."""

from __future__ import annotations

import pytest

from harness.catalogue import signal_of
from harness.errors import HarnessError
from harness.outcomes import FailureClass
from harness.runners import load_signatures, logcat_messages
from tests.shared import SHARED

SIGS = load_signatures()
FAILURE_CLASSES = {"init-error", "runtime-error", "shape-error", "qnn-library-missing", "binary-mismatch",
                   "crash", "timeout", "transport-error", "library-missing", "qnn-version-mismatch"}

# Exact strings from mnn-llm.md §1/§4 and executorch-qnn.md §1 -> (class, signature id)
KNOWN = [
    ("[Error]: tokenizer file not found: nope/tokenizer.txt", "init-error", "file-not-found"),
    ("[Error]: LLM weight file not found: bad/llm.mnn.weight", "init-error", "file-not-found"),
    ("./llm_demo: error while loading shared libraries: libMNN_Express.so: cannot open shared object file: "
     "No such file or directory", "library-missing", "glibc-library-missing"),
    ('CANNOT LINK EXECUTABLE "/data/local/tmp/harness/runtimes/llm_demo-v79/llm_demo": library "libc++_shared.so" '
     'not found: needed by main executable', "library-missing", "android-library-missing"),
    ("LLM init error", "init-error", "llm-init-error"),
    ("Unable to open config file: nope/config.json", "init-error", "config-open"),
    ("[Error]: Load module failed, please check model.", "init-error", "load-module-failed"),
    ("size_limit must be array larger than 1, eg: [128, 1]", "init-error", "chunk-limits-invalid"),
    ("MNN_QNN: Failed to open QNN libs. Ensure that the libs related to the QNN HTP backend is available in your "
     "environment. dlerror() returns dlopen failed: library \"libQnnHtp.so\" not found.", "qnn-library-missing",
     "qnn-libs-missing"),
    ("QNN: Failed to validate binary: 5004", "binary-mismatch", "qnn-binary-invalid"),
    ("Broad cast error, dim1 = 3, dim2 = 4", "shape-error", "broadcast-error"),
    ("Compute Shape Error for /layers.0/mlp/Add", "shape-error", "compute-shape-error"),
    ("code=3 in onForward, 531", "shape-error", "forward-size-error"),
    ("MNN_QNN: Failed to compute shape for Plugin Op.", "shape-error", "qnn-plugin-shape"),
    ("Error in file QNNBackend.cpp, line 812: error code 6004", "shape-error", "qnn-io-mismatch"),
    ("Error in file QNNBackend.cpp, line 812: error code 1002", "runtime-error", "qnn-finalize-failed"),
    ("Error in file QNNBackend.cpp, line 812: error code 6000", "runtime-error", "qnn-execute-failed"),
    ("Error: Response generation failed due to internal error", "runtime-error", "response-failed"),
    ("[Error]: LLM in error state. Status: 4", "runtime-error", "llm-error-state"),
    ("QNN: Error: KV length 4097 larger than max size = 4096", "runtime-error", "qnn-kv-overflow"),
    ("Omni Can't open image", "runtime-error", "omni-image-unreadable"),
    ("[Error]: something new", "runtime-error", "mnn-error-generic"),
    ("Segmentation fault", "crash", "crash-segfault-text"),
    ("段错误 (核心已转储)", "crash", "crash-segfault-text"),
    ("ERROR: unknown command line flag 'kv_updater'", "init-error", "et-unknown-flag"),
    # real host QNN lines (docs/qnn-failures.md; fixtures/qnn_logs)
    ("[ERROR] [Qnn ExecuTorch]:  <E> Failed to set scatter gather parameters: unknown custom config socModel 0",
     "qnn-version-mismatch", "et-qnn-device-config-abi"),
    ("[ERROR] [Qnn ExecuTorch]:  <E> Using newer context binary on old SDK", "binary-mismatch",
     "qnn-newer-context-binary"),
]


def test_file_is_valid_and_covers_the_classes():
    assert set(SIGS.classes) == FAILURE_CLASSES | {"ok"}
    ids = [s.id for s in SIGS.signatures]
    assert len(ids) == len(set(ids))
    for s in SIGS.signatures:
        assert s.description and s.hint and s.cls in set(SIGS.classes) | {"warning"}
    # Every class that output lines can show has at least one signature.
    assert {s.cls for s in SIGS.signatures} >= FAILURE_CLASSES - {"timeout", "transport-error"}


@pytest.mark.parametrize("line,cls,sig", KNOWN)
def test_known_lines(line, cls, sig):
    m = SIGS.match_line(line, "stdout", exit_code=0)
    assert m is not None and (m.signature.cls, m.signature.id) == (cls, sig)
    c = SIGS.classify(stdout=line + "\n", exit_code=0)
    assert c.cls == cls and c.primary.signature.id == sig and line in c.errors and c.hint


def test_precedence_and_process_facts():
    # A crash after a QNN error is a crash; a timeout wins over whatever was printed.
    assert SIGS.classify(stdout="[Error]: LLM in error state. Status: 4\n", exit_code=139).cls == "crash"
    assert SIGS.classify(stdout="Segmentation fault\n", exit_code=-11).reason == "killed by SIGSEGV"
    assert SIGS.classify(exit_code=134).cls == "crash"
    assert SIGS.classify(stdout="LLM init error\n", timed_out=True).cls == "timeout"
    assert SIGS.classify(transport_error="device offline").cls == "transport-error"
    both = SIGS.classify(stdout="MNN_QNN: Failed to open QNN libs. x\nLLM init error\n")
    assert both.cls == "qnn-library-missing" and both.signature_ids == ["qnn-libs-missing", "llm-init-error"]
    assert SIGS.classify(exit_code=3).cls == "runtime-error"
    assert SIGS.classify(stdout="prompt file is p.txt\n", exit_code=1).primary.signature.id == "prompt-file-missing"
    assert SIGS.classify(stdout="prompt file is p.txt\n", exit_code=0).ok
    warn = SIGS.classify(stdout="[MNN:LLM] Warning: sequence length 5000 exceeds max_position_embeddings (4096), x\n")
    assert warn.ok and warn.to_json()["warnings"]


def test_signal_of():
    assert signal_of(139) == 11 and signal_of(-6) == 6 and signal_of(0) is None and signal_of(255) is None


def test_logcat_formats():
    text = ("--------- beginning of main\n"
            "12-02 13:16:00.123  4242  4242 E MNNJNI  : [Error]: LLM in error state. Status: 4\n"
            "E/MNNJNI( 4242): LLM init error\n"
            "12-02 13:16:00.200  4242  4242 I other   : unrelated\n")
    assert logcat_messages(text, ["MNNJNI"]) == ["[Error]: LLM in error state. Status: 4", "LLM init error"]


def test_bad_signature_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "sigs.yaml"
    bad.write_text("version: 1\nclasses: [ok]\nsignatures:\n  - {id: x, class: ok, regex: '(', description: d, hint: h}\n")
    with pytest.raises(HarnessError, match="regex"):
        load_signatures(bad)
    with pytest.raises(HarnessError, match="not found"):
        load_signatures(tmp_path / "missing.yaml")


def test_classes_are_spelled_as_harness_outcomes_spells_them(tmp_path):
    """A class a record may carry has one spelling (harness/outcomes.py); a file with another is refused."""
    assert {FailureClass(c) for c in SIGS.classes} <= set(FailureClass)
    bad = tmp_path / "sigs.yaml"
    bad.write_text("version: 1\nclasses: [transport_error, ok]\nsignatures:\n"
                   "  - {id: x, class: ok, regex: 'x', description: d, hint: h}\n")
    with pytest.raises(HarnessError, match=r"sigs.yaml: classes 'transport_error' are not failure classes"):
        load_signatures(bad)


# Loader failures: the runner never started; the class and its text name the library.
LOADER_CASES = [
    # glibc ld.so (exit 127), as the real x86_64 llm_demo prints it without libMNN_Express.so
    ("./llm_demo: error while loading shared libraries: libMNN_Express.so: cannot open shared object file: "
     "No such file or directory\n", 127, "libMNN_Express.so"),
    # Android's linker (exit 1); bionic prints the soname in quotes
    ('CANNOT LINK EXECUTABLE "/data/local/tmp/harness/runtimes/llm_demo-v79/llm_demo": library "libllm.so" not '
     'found: needed by main executable\n', 1, "libllm.so"),
    # the older Android form (no "needed by")
    ('CANNOT LINK EXECUTABLE "llm_demo": library "libMNN.so" not found\n', 1, "libMNN.so"),
]


@pytest.mark.parametrize("stderr,code,lib", LOADER_CASES)
def test_loader_failures_name_the_library(stderr, code, lib):
    c = SIGS.classify(stdout="", stderr=stderr, exit_code=code)
    assert c.cls == "library-missing"
    assert lib in c.reason and lib in c.hint
    assert "no known error line" not in c.reason


def test_file_not_found_hint_names_the_missing_file():
    tok = SIGS.classify(stdout="[Error]: tokenizer file not found: /m/tokenizer.mtok\nLLM init error\n", exit_code=0)
    assert tok.cls == "init-error" and tok.primary.signature.id == "file-not-found"
    assert "/m/tokenizer.mtok" in tok.hint and "weight" not in tok.hint
    assert "tokenizer" in tok.reason and "/m/tokenizer.mtok" in tok.reason
    weight = SIGS.classify(stdout="[Error]: LLM weight file not found: /m/llm.mnn.weight\n", exit_code=0)
    assert weight.primary.signature.id == "file-not-found" and "/m/llm.mnn.weight" in weight.hint


def test_real_abi_log_is_a_version_mismatch_not_missing_libraries():
    """The whole run log of ExecuTorch 1.5.1 on QAIRT 2.51.0 (../shared): its 'Failed to initialize
    QNN backend' line would say qnn-library-missing; the device-config line names the cause."""
    log = SHARED / "models/et-qnn-host/abi/run-qairt-2.51.0.log"
    if not log.is_file():
        pytest.skip(f"{log} is absent (../shared's et-qnn-host abi logs)")
    c = SIGS.classify(stdout=log.read_text(), exit_code=1)
    assert c.cls == "qnn-version-mismatch" and c.primary.signature.id == "et-qnn-device-config-abi"
