"""The one catalogue of failure lines (harness/catalogue/lines.yaml): every entry well formed, a
row per entry (its own line is seen by every reader its scopes name, with its class, shape kind
and QNN failure), and one new entry is seen by the runner, shape and QNN-log readers at once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.catalogue import DEFAULT_PATH, RUNNER_SCOPES, Entry, Scope, load_catalogue
from harness.checks.shapes import VISUAL_GUARDS, ShapeKind, scan_log_for_shape_errors
from harness.errors import HarnessError
from harness.lab.exports import classify_failure
from harness.outcomes import SIGNATURE_WARNING, FailureClass
from harness.qnn import FAILURE_CLASS, QnnFailure, classify_qnn_log
from harness.runners import load_signatures
from harness.runners.logits_diff import parse as parse_logits_diff


def printf(fmt: str, *args: object) -> str:
    """MNN's printf format strings rendered as printf renders them (%d, %s, %f)."""
    return fmt % args  # noqa: UP031


CAT = load_catalogue()
REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures" / "qnn_logs"

# One real line per entry (from the entry's source: upstream format strings, the QNN logs of
# fixtures/qnn_logs and ../shared/models/et-qnn-host, the public threads issue 34 cites).
LINE: dict[str, str] = {
    "crash-segfault-text": "Segmentation fault (core dumped)",
    "crash-abort-text": "Aborted (core dumped)",
    "crash-fatal-signal": "Fatal signal 11 (SIGSEGV), code 1 (SEGV_MAPERR), fault addr 0x0 in tid 4242 (llm_demo)",
    "glibc-library-missing": "./llm_demo: error while loading shared libraries: libMNN.so: cannot open shared "
                             "object file: No such file or directory",
    "android-library-missing": 'CANNOT LINK EXECUTABLE "./llm_demo": library "libc++_shared.so" not found',
    "runner-not-found": "/system/bin/sh: ./llm_demo: not found",
    "qnn-libs-missing": "MNN_QNN: Failed to open QNN libs. Ensure that the libs related to the QNN HTP backend is "
                        "available in your environment.",
    "et-qnn-libs-missing": "[ERROR] [Qnn ExecuTorch]: Cannot Open QNN library libQnnHtp.so, with error: "
                           "libQnnHtp.so: cannot open shared object file: No such file or directory",
    "qnn-system-context": "Could not create system context handle",
    "qnn-skel-load-failed": "Failed to load skel, error 4000",
    "qnn-remote-symbols": "Unable to load Remote symbols 1008",
    "et-qnn-device-config-abi": "[ERROR] [Qnn ExecuTorch]:  <E> Failed to set scatter gather parameters: unknown "
                                "custom config socModel 0",
    "qnn-stub-lib-mismatch": "Stub lib id mismatch: expected v2.28.0.241029 (libQnnHtp.so), detected v2.25.0.240728",
    "qnn-newer-context-binary": "[ERROR] [Qnn ExecuTorch]:  <E> Using newer context binary on old SDK",
    "qnn-binary-invalid": "QNN: Failed to validate binary: 5004",
    "qnn-context-create-failed": "[ERROR] [Qnn ExecuTorch]: Can't create context from binary. Error 5000.",
    "qnn-unsupported-context-version": "ERROR: Unsupported context binary version",
    "et-qnn-backend-init-failed": "[method.cpp:128] Init failed for backend QnnBackend: 0x1",
    "broadcast-error": "Broad cast error, dim1 = 3, dim2 = 4",
    "compute-shape-error": "Compute Shape Error for /layers.0/mlp/Add",
    "forward-size-error": "code=3 in onForward, 531",
    "qnn-plugin-shape": "MNN_QNN: Failed to compute shape for Plugin Op.",
    "qnn-raw-shape": "MNN_QNN: Failed to find raw shape deepstack_embeds.",
    "qnn-io-mismatch": "Error in file QNNBackend.cpp, line 812: error code 6004",
    "multimodal-merge": "[Error]: failed to build merged multimodal embeddings",
    "multimodal-embeddings-unreadable": "[Error]: merged multimodal embeddings are not readable",
    "visual-output-guard": f"[Error]: {VISUAL_GUARDS[1]}: outputs=1",
    "file-not-found": "[Error]: tokenizer file not found: nope/tokenizer.txt",
    "file-open-denied": "[Error]: Failed to open llm.mnn (permission denied?)",
    "tokenizer-load": "[Error]: Failed to load tokenizer from tokenizer.mtok",
    "load-module-failed": "[Error]: Load module failed, please check model.",
    "config-open": "Unable to open config file: nope/config.json",
    "chunk-limits-invalid": "size_limit must be array larger than 1, eg: [128, 1]",
    "qnn-plugin-attr": "MNN_QNN: Incorrect Plugin Op, can't find 'allInputShape' attr.",
    "qnn-asym-quant": "MNN_QNN: Not supported asymmetric quant",
    "qnn-graph-io": "qnn/plugin/op, can't find 4 input: deepstack_embeds",
    "qnn-mask-missing": "Can't find mask from qnn model",
    "llm-init-error": "LLM init error",
    "prompt-file-missing": "prompt file is prompt.txt",
    "et-unknown-flag": "ERROR: unknown command line flag 'kv_updater'",
    "et-missing-operator": "E 00:00:00.1 executorch:[method.cpp:757] Missing operator: [0] llama::custom_sdpa.out",
    "et-method-load-failed": "E 00:00:00.1 executorch:[text_decoder_runner.h:64] Failed to load method 'forward'",
    "et-generation-failed": "RuntimeError: Generation failed",
    "et-qnn-sdk-setup": "RuntimeError: Failed to set up QNN SDK.",
    "et-qnn-backend-init": "Failed to initialize QNN backend for kHtpBackend. Ensure QNN SDK libraries are available",
    "et-load-failed": "Model load failed",
    "et-debug-buffer-too-small": "E 00:00:01.250 executorch:buffer_data_sink.cpp:47] Ran out of space to store "
                                 "intermediate outputs.",
    "qnn-finalize-failed": "Error in file QNNBackend.cpp, line 812: error code 1002",
    "qnn-execute-failed": "Error in file QNNBackend.cpp, line 812: error code 6000",
    "qnn-call-failed": "Error in file QNNBackend.cpp, line 812: error code 1004",
    "qnn-plugin-exec": "MNN_QNN: Failed to execute Plugin Op.",
    "qnn-kv-overflow": "QNN: Error: KV length 4097 larger than max size = 4096",
    "qnn-kv-remove": "QNN: Error: Remove 9 larger than current = 4",
    "invalid-output-tensor": "[Error]: invalid output tensor from onForward",
    "onforward-no-outputs": "[Error]: onForward returned no outputs. seqLen=128",
    "response-failed": "Error: Response generation failed due to internal error",
    "generation-failed": "Error: Generation failed due to internal error",
    "llm-error-state": "[Error]: LLM in error state. Status: 4",
    "empty-input": "[Error]: empty input_ids",
    "omni-image-unreadable": "Omni Can't open image",
    "qwen-vl-resize": "Qwen-VL smart resize requires height and width >= factor",
    "mnn-error-generic": "[Error]: something new",
    "logits-diff-usage": "Usage: ./llm_logits_diff config_a.json config_b.json prompt.txt [max_tokens]",
    "logits-diff-max-tokens": "Invalid max_tokens: -3",
    "logits-diff-prompt-file": "Failed to open prompt file: prompt.txt",
    "logits-diff-load-failed": "load failed",
    "qnn-op-validation": "[ERROR] [Qnn ExecuTorch]:  <E> Failed to validate op aten_matmul_default with error 0xc26",
    "et-undelegated-op": "Node aten_native_layer_norm_default with op <EdgeOpOverload: aten.native_layer_norm.default>"
                         " was not decomposed or delegated",
    "qnn-graph-finalize": "[ERROR] [Qnn ExecuTorch]: Failed to finalize Qnn Graph with error: 1002",
    "qnn-device-handle-14001": "[ERROR] [Qnn ExecuTorch]: Failed to create device_handle for Backend ID 6, error=14001",
    "qnn-lib-cannot-open": "OSError: libQnnHtp.so: cannot open shared object file: No such file or directory",
    "et-program-invalid": "[program.cpp:134] File size is too small. Expected file size from extended header is 9",
    "qnn-context-deserialize": "[ERROR] [Qnn ExecuTorch]:  <E> Failed to initialize deserializer",
    "process-out-of-memory": "Killed",
    "process-timed-out": "subprocess.TimeoutExpired: Command '...' timed out after 20 seconds",
    "export-tool-not-found": "bash: qnn-context-binary-generator: command not found",
    "export-module-missing": "ModuleNotFoundError: No module named 'executorch'",
    "export-sdk-missing": "QNN_SDK_ROOT is not set",
    "seq-exceeds-max-pos": "[MNN:LLM] Warning: sequence length 5000 exceeds max_position_embeddings (4096), x",
    "module-clone": "Warning: module need new clone",
    # MNN's printf formats (QNNBackend.cpp, compilefornpu.cpp; docs/placement.md#mnns-own-words) rendered.
    "mnn-qnn-op-not-registered": printf("MNN_QNN: Not registered type %d, %s.", 128, "/layers.0/self_attn/Foo"),
    "mnn-qnn-op-unsupported": printf("MNN_QNN: Don't support type %d, %s.", 16, "/layers.3/mlp/act/Gelu"),
    "mnn-npu-module-error": printf("error = %f, max = %f for %s", 0.8125, 2.375, "qnn/graphllm3"),
    "mnn-npu-compile-failed": printf("Failed to compile: %s", "qnn/graphllm5"),
    "mnn-npu-speed": printf("%s, Speed Compare: NPU: %f ms : CPU: %f ms", "qnn/graphllm0", 1.25, 4.5),
    "mnn-npu-total-speed": printf("Total Speed Compare: NPU: %f ms : CPU: %f ms", 21.5, 80.25),
}


def test_every_entry_has_a_row_and_is_complete() -> None:
    assert sorted(LINE) == sorted(e.id for e in CAT.entries), "a catalogue entry needs its row in LINE"
    raw = yaml.safe_load(DEFAULT_PATH.read_text(encoding="utf-8"))["signatures"]
    for r in raw:  # the packaged file states every entry's scopes and source (an older file may not)
        assert r.get("scopes") and r.get("source"), r["id"]
    for e in CAT.entries:
        assert e.cls == SIGNATURE_WARNING or e.cls in set(FailureClass), e.id
        assert e.description and e.hint and e.source, e.id


@pytest.mark.parametrize("entry", CAT.entries, ids=lambda e: e.id)
def test_row(entry: Entry) -> None:
    """The entry's line is seen by each reader its scopes name, as this entry."""
    line = LINE[entry.id]
    assert entry.regex.search(line), line
    if entry.in_scope(*RUNNER_SCOPES):
        sigs = load_signatures()
        for scope, source in ((Scope.RUNNER_OUTPUT, "stdout"), (Scope.LOGCAT, "logcat")):
            m = sigs.match_line(line, source, exit_code=(entry.exit_codes or (0,))[0])
            assert (m.signature.id if m else None) == (entry.id if scope in entry.scopes else None), source
    if entry.shape_kind is not None:
        found = scan_log_for_shape_errors(f"unrelated line\n{line}\n")
        assert [(f.kind, f.where.line_no) for f in found] == [(ShapeKind(entry.shape_kind), 2)]
    if entry.qnn_failure is not None:
        failure = QnnFailure(entry.qnn_failure)
        assert entry.cls == FAILURE_CLASS[failure].value
        code = 124 if failure is QnnFailure.TIMEOUT else 1
        assert classify_qnn_log(f"[INFO] [Qnn ExecuTorch]: start\n{line}\n", code, table=None).failure is failure
    if Scope.EXPORT_BUILD in entry.scopes:
        assert classify_failure(f"start\n{line}\n", 1).failure_class == entry.cls
    if Scope.LOGITS_DIFF in entry.scopes:
        assert parse_logits_diff(f"prompt tokens: 3, max new tokens: 4\n{line}\n").fatal == [line]


def test_visual_guards_are_the_catalogue_s() -> None:
    for guard in VISUAL_GUARDS:
        found = scan_log_for_shape_errors(f"[Error]: {guard}: x\n")
        assert [f.kind for f in found] == [ShapeKind.VISUAL_GUARD], guard


NEW_TEXT = "[ERROR] [Qnn ExecuTorch]:  <E> Context binary signed for another HTP generation (v79)"
NEW_ENTRY = """
  - id: qnn-context-other-generation
    class: binary-mismatch
    scopes: [runner-output, logcat, qnn-log]
    qnn: newer-context-binary
    shape: {kind: qnn_validate_binary}
    source: tests/catalogue/test_catalogue.py
    regex: '<E> Context binary signed for another HTP generation \\((v\\d+)\\)'
    description: A new QNN error text.
    hint: Recompile the binary for this device (it was built for {1}).
"""


def _catalogue_with(tmp_path: Path, entry: str) -> Path:
    text = DEFAULT_PATH.read_text(encoding="utf-8")
    head, sep, tail = text.partition("\nsignatures:\n")
    path = tmp_path / "lines.yaml"
    path.write_text(head + sep + entry.strip("\n") + "\n" + tail, encoding="utf-8")
    return path


def test_one_new_entry_is_seen_by_every_reader(tmp_path: Path) -> None:
    """A new QNN error text added as one entry: the runner, the shape check and QNN's log reader
    all see it; without the entry, none does."""
    log = f"[INFO] [Qnn ExecuTorch]: Caching: Caching is in RESTORE MODE.\n{NEW_TEXT}\n"
    new = load_catalogue(_catalogue_with(tmp_path, NEW_ENTRY))
    for cat, seen in ((new, True), (CAT, False)):
        runner = load_signatures(cat.source).classify(stdout=log, exit_code=1)
        assert (runner.primary.signature.id if runner.primary else None) == (
            "qnn-context-other-generation" if seen else None)
        shapes = scan_log_for_shape_errors(log, catalogue=cat)
        assert [f.kind for f in shapes] == ([ShapeKind.QNN_VALIDATE_BINARY] if seen else [])
        if seen:  # one fix, its groups filled in by both readers
            assert runner.hint == shapes[0].hint == "Recompile the binary for this device (it was built for v79)."
        qnn = classify_qnn_log(log, 1, table=None, catalogue=cat)
        assert qnn.failure is (QnnFailure.NEWER_CONTEXT_BINARY if seen else None)
        assert qnn.to_json()["class"] == (FailureClass.BINARY_MISMATCH.value if seen else None)


@pytest.mark.parametrize("entry,error", [
    (NEW_ENTRY.replace("qnn: newer-context-binary", "qnn: no-such-failure"), "is not a QnnFailure"),
    (NEW_ENTRY.replace("class: binary-mismatch", "class: init-error"), "write that class"),
    (NEW_ENTRY.replace("{kind: qnn_validate_binary}", "{kind: no_such_kind}"), "is not a harness/checks/shapes"),
    (NEW_ENTRY.replace("    qnn: newer-context-binary\n", ""), "if and only if"),
    (NEW_ENTRY.replace("[runner-output, logcat, qnn-log]", "[runner-output, stdout, qnn-log]"), "key 'scopes'"),
    (NEW_ENTRY.replace("class: binary-mismatch", "class: export-crash"), "is not one of"),
    (NEW_ENTRY.replace("'<E> Context", "'(\\w+\\s?)*<E> Context"), "nests a repeat inside a repeat"),
    (NEW_ENTRY.replace("'<E> Context", "'.*a.*b.*<E> Context"), "more than 2 unbounded wildcards in a row"),
])
def test_a_bad_entry_is_a_clear_error(tmp_path: Path, entry: str, error: str) -> None:
    """A wrong entry names the file and the entry, whichever reader loads it first."""
    path = _catalogue_with(tmp_path, entry)
    with pytest.raises(HarnessError, match=error) as exc:
        cat = load_catalogue(path)
        scan_log_for_shape_errors("x\n", catalogue=cat)
        classify_qnn_log("x\n", 1, table=None, catalogue=cat)
    assert str(path) in str(exc.value)


def test_a_line_is_read_up_to_the_cap_so_the_readers_stay_finite() -> None:
    from harness.catalogue import MAX_LINE_CHARS

    # A runner printing megabytes without a newline: the packaged `crash-abort-text` alone is
    # quadratic in a line of "<E> " (hours on 2 MB, milliseconds on the capped line).
    line = "<E> " * 500_000
    assert load_signatures().classify(stdout=line + "\n", exit_code=0).primary is None
    assert classify_qnn_log(line, 0, table=None).failure is None
    known = "QNN: Failed to validate binary: -1"
    assert len(scan_log_for_shape_errors(known)) == 1
    assert scan_log_for_shape_errors("x" * MAX_LINE_CHARS + known) == [], "past the cap: not read"


@pytest.mark.parametrize("module", ["harness.qnn.log", "harness.runners.llm_demo"])
def test_a_damaged_catalogue_is_a_clear_error_of_the_readers_clis(tmp_path: Path, module: str, monkeypatch,
                                                                  capsys) -> None:
    import importlib

    from harness.catalogue import load as catalogue_load

    damaged = tmp_path / "lines.yaml"
    damaged.write_text("classes: [a\nsignatures: {", encoding="utf-8")
    monkeypatch.setattr(catalogue_load, "DEFAULT_PATH", damaged)
    log = tmp_path / "run.log"
    log.write_text("[ERROR] something\n")
    main = importlib.import_module(module if module.endswith(".log") else f"{module}.cli").main
    assert main([str(log)]) == 2  # undecidable, never 1 ("found") with a traceback
    assert f"{damaged}: YAML syntax error" in capsys.readouterr().err


@pytest.mark.parametrize("line", ["/system/bin/sh: ./llm_demo: not found", "sh: 1: llm_demo: not found",
                                  "env: '/venv/bin/python3': No such file or directory",
                                  "./run.sh: /usr/bin/python3: bad interpreter: No such file or directory"])
def test_an_exit_127_is_named_as_the_runner_or_its_interpreter_not_found(line: str) -> None:
    found = load_signatures().classify(stderr=line + "\n", exit_code=127)
    assert found.primary is not None and found.primary.signature.id == "runner-not-found", found.reason
    assert load_signatures().classify(stderr=line + "\n", exit_code=1).primary is None, "only with exit 127"
