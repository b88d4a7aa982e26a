"""Qwen3 (text) on the device: the checks of harness.suite.QWEN3 (static shape guards,
activation quantization, the QNN and CPU LLM backends with coherence and agreement, and
chunked-prefill equivalence), the same list `harness lab run` iterates for `- name: qwen3`.

    pytest suites/qwen3 --device oneplus13 --model-dir EXPORT --runtime-dir RUNTIME [--qnn-sdk SDK] [--checks static]
"""

from __future__ import annotations

from harness.suite import QWEN3
from suites.support import suite_tests

SUITE = QWEN3
globals().update(suite_tests(SUITE))
