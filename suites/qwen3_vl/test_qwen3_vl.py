"""Qwen3-VL on the device: the checks of harness.suite.QWEN3_VL (static shape guards,
activation quantization, the visual x LLM backend matrix QNN/QNN, QNN/CPU, CPU/QNN, CPU/CPU
with coherence and agreement, runtime shape guards, chunked-prefill mRoPE positions and
equivalence), the same list `harness lab run` iterates for a plan's `- name: qwen3_vl`.

    pytest suites/qwen3_vl --device oneplus13 --model-dir EXPORT --runtime-dir RUNTIME [--qnn-sdk SDK] [--checks static]
"""

from __future__ import annotations

import pytest

from harness.suite import QWEN3_VL
from suites.support import suite_tests

SUITE = QWEN3_VL
pytestmark = [pytest.mark.visual]
globals().update(suite_tests(SUITE))
