"""An export's failure class: QNN's signatures through harness/qnn/log.py on the real
failure logs in ../shared (the v68 lowerings, the device-config ABI failure), the exporter's own
(kill, crash, traceback, missing tool) on small texts."""

from __future__ import annotations

import json
import signal

import pytest

from harness.lab.exports import TRANSIENT, ExportFailure, classify_failure
from tests.qnn.material import et_qnn_or_skip


def _shared_log(rel: str) -> tuple[str, int]:
    log = et_qnn_or_skip(rel)
    rc = json.loads(log.with_suffix(".rc.json").read_text())["rc"]
    return log.read_text(errors="replace"), rc


@pytest.mark.parametrize("rel", ["seed-v68/lnprobe-16a4w-sa8295.log", "seed-v68/ln-16a4w-ln16a16w-sa8295.log"])
def test_v68_lowering_is_qnn_op_validation_with_ops_and_arches(rel):
    text, rc = _shared_log(rel)
    v = classify_failure(text, rc)
    assert v.failure_class == "qnn-op-validation", (v.failure_class, v.message)
    assert "layer_norm" in v.message and "v68" in v.message and "v73" in v.message, v.message
    assert "aten_native_layer_norm_default" in v.message, "QNN's node names are in the message"
    assert v.facts["arch"] == "v68" and v.facts["needed_arch"] == "v73" and v.cacheable


def test_device_config_abi_is_qnns_class():
    text, rc = _shared_log("abi/lower-qairt-2.51.0.log")
    v = classify_failure(text, rc)
    assert v.failure_class == "qnn-device-config-abi", (v.failure_class, v.message)


@pytest.mark.parametrize("text, rc, cls, words", [
    ("working ...\n", -signal.SIGKILL, ExportFailure.KILLED_FOR_MEMORY, "OOM killer"),
    ("Traceback (most recent call last):\n  File \"x\"\nMemoryError\n", 1, ExportFailure.KILLED_FOR_MEMORY, "OOM"),
    ("step 3 of 4: folding constants\n", -signal.SIGSEGV, ExportFailure.CRASH, "SIGSEGV"),
    ("ModuleNotFoundError: No module named 'executorch'\n", 1, ExportFailure.MISSING_TOOL, "No module named"),
    ("sh: 1: llmexport.py: not found\n", 127, ExportFailure.MISSING_TOOL, "not found"),
    ("Traceback (most recent call last):\n  File \"a.py\", line 3\nKeyError: 'lm_head'\n", 1,
     ExportFailure.PYTHON_ERROR, "KeyError: 'lm_head'"),
    ("something went wrong\n", 2, ExportFailure.FAILED, "exit code 2; last line: something went wrong"),
])
def test_exporter_side_classes(text, rc, cls, words):
    v = classify_failure(text, rc)
    assert v.failure_class == cls.value and words in v.message, (v.failure_class, v.message)
    assert v.cacheable is (cls not in TRANSIENT)


def test_a_shell_reports_a_signal_as_128_plus_n():
    v = classify_failure("compiling\n", 139, shell=True)
    assert v.failure_class == "export-crash" and "SIGSEGV" in v.message and v.facts["signal"] == "SIGSEGV"


def test_a_segfault_while_qnn_builds_is_qnns_with_the_last_lines():
    text = ("[INFO] [Qnn ExecuTorch]: Running level=3 optimization.\n"
            "[ERROR] [Qnn ExecuTorch]:  <E> grdep_clone_op.cc:340::ERROR:failed to clone op(q::Add)\n"
            "Segmentation fault (core dumped)\n")
    v = classify_failure(text, -signal.SIGSEGV)
    assert v.failure_class == "qnn-build-segfault" and "SIGSEGV" in v.message and "grdep_clone_op" in v.message
    assert v.last_lines[-1] == "Segmentation fault (core dumped)" and v.facts["signal"] == "SIGSEGV"


def test_timeout_wins_and_is_not_cached():
    v = classify_failure("<E> anything\n", -9, timed_out=30.0)
    assert v.failure_class == "export-timeout" and "30 s" in v.message and not v.cacheable


@pytest.mark.parametrize("text", [
    "Traceback (most recent call last):\n  File \"llama.py\", line 9\n"
    "urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>\n",
    "Traceback (most recent call last):\n  File \"x.py\", line 2\nOSError: [Errno 5] Input/output error: 'w.bin'\n",
    "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co'): Connection reset by peer\n",
])
def test_network_and_io_failures_are_the_hosts_and_not_kept(text):
    v = classify_failure(text, 1)
    assert v.failure_class == ExportFailure.HOST_FAULT.value and not v.cacheable, (v.failure_class, v.message)
    assert "not kept in the cache" in v.message
