"""harness.hostrt.executorch without the engine: qnn_llama_runner's gflags, the refusals the real
runner makes, the runtime folder's script, and the missing-extra exit (the real runs are in
tests/suites/test_executorch_host_lane.py and the captures in fixtures/executorch)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.hostrt import executorch as het

REPO = Path(__file__).resolve().parents[2]


def test_gflags_forms_and_defaults() -> None:
    f = het.parse_flags(["--model_path", "m.pte", "--prompt=a", "-prompt", "b", "--seq_len=64", "--shared_buffer",
                         "--temperature", "0.5", "--eval_mode", "0"])
    assert f["model_path"] == "m.pte" and f["prompt"] == ["a", "b"] and f["seq_len"] == 64
    assert f["shared_buffer"] is True and f["temperature"] == 0.5 and f["eval_mode"] == 0
    assert f["tokenizer_path"] == "tokenizer.bin" and f["decoder_model_version"] == "llama2"
    assert het.parse_flags(["--shared_buffer=false"])["shared_buffer"] is False
    with pytest.raises(het.FlagError, match="unknown command line flag 'kv_updater'"):
        het.parse_flags(["--kv_updater", "SmartMask"])
    with pytest.raises(het.FlagError, match="illegal value 'x'"):
        het.parse_flags(["--seq_len", "x"])


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.hostrt.executorch", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def test_refusals_before_the_engine() -> None:
    bad = _run("--kv_updater", "SmartMask")
    assert bad.returncode == 1 and bad.stderr == "ERROR: unknown command line flag 'kv_updater'\n"
    both = _run("--prompt", "a", "--tokenized_prompt", "ids.bin")
    assert both.returncode == 1 and "Only one of prompt and tokenized_prompt" in both.stderr


def test_without_the_extra_it_says_how_to_install() -> None:
    code = ("import sys; sys.modules['executorch'] = None; from harness.hostrt.executorch import main; "
            "sys.exit(main(['--model_path', 'm.pte', '--prompt', 'x']))")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == het.EXIT_NO_ENGINE and "pip install 'harness[executorch]'" in res.stderr


def test_runtime_folder_holds_a_qnn_llama_runner_script(tmp_path: Path) -> None:
    """The host's runtime folder: the LLM runner and the program runner (a forward PTE), nothing else."""
    folder = het.make_runtime_dir(tmp_path / "rt")
    script = folder / "qnn_llama_runner"
    assert sorted(p.name for p in folder.iterdir()) == ["pte_runner", "qnn_llama_runner"]
    assert all(os.access(p, os.X_OK) for p in folder.iterdir())
    res = subprocess.run([str(script), "--no_such_flag"], capture_output=True, text=True, timeout=60,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert res.returncode == 1 and "unknown command line flag 'no_such_flag'" in res.stderr
