"""A prompt the device cannot be given (NUL, lone surrogate) is refused before anything is
made on the device: no run folder, no derived config."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from runner_helpers import SM8750_ENV

from harness.errors import HarnessError, UnsendableText


@pytest.mark.parametrize("bad, what", [("caf\udce9 au lait", "lone surrogate U+DCE9"), ("a\0b", "NUL byte")])
def test_unsendable_prompt_is_refused_before_the_device_is_touched(local_setup, bad, what):
    s = local_setup()
    model_dir = Path(s.model.remote_dir)
    before = sorted(p.name for p in model_dir.iterdir())
    with pytest.raises(UnsendableText, match=re.escape(f"prompt #2 holds a {what}")) as info:
        s.runner().run(["fine", bad], backend="cpu", extra_env=SM8750_ENV)
    assert isinstance(info.value, HarnessError)
    assert not Path(s.transport.device.work_dir, "runs").exists()
    assert sorted(p.name for p in model_dir.iterdir()) == before  # no derived config either
