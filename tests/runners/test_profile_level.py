"""QNN's profiling switched on at run time on the host, as `qnn_executor_runner --profile_level 2`
does it (harness/hostrt/executorch/backend_options.py). The real runs are the virtual phone's
(tests/suites/test_executorch_device_profile.py: per-op cycles of a program lowered without
profiling) and fixtures/executorch/qnn/qwen3-16a4w-sm8650-rt2-x20.etdp (tests/runners/test_etdump_qnn.py);
here, an unknown level is refused with the levels named."""

from __future__ import annotations

import pytest

from harness.hostrt.executorch.backend_options import set_profile_level


def test_an_unknown_level_is_refused_with_the_levels() -> None:
    with pytest.raises(RuntimeError, match=r"QNN's levels are 0 \(off\), 1 \(basic\) and 2 \(per op\)"):
        set_profile_level(7)
