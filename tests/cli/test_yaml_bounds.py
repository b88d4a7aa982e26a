"""A YAML alias bomb ("billion laughs", 1 KB) in devices.yaml or a plan, where a string or a
number is expected: the command answers at once with exit 4 naming the file, no traceback
(issue 36, fault 2). The child runs under a 1.5 GB address-space limit: an unbounded expansion
dies of MemoryError (exit 3) instead of taking the machine's memory."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from clikit import REPO

from harness.validation import shown


def _bomb(indent: str) -> str:
    lines = [f"{indent}- &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{indent}- &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60, preexec_fn=_limit, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize("key", ["description", "work_dir", "serial"])
def test_an_alias_bomb_in_devices_yaml_is_exit_4(tmp_path: Path, key: str) -> None:
    devices = tmp_path / "devices.yaml"
    fields = {"name": "d1", "transport": "adb", "serial": "emulator-5554", "work_dir": "/data/local/tmp/h"}
    rest = "".join(f"    {k}: {v}\n" for k, v in fields.items() if k not in ("name", key))
    devices.write_text(f"devices:\n  - name: d1\n{rest}    {key}:\n{_bomb('      ')}")
    assert len(devices.read_bytes()) < 1024
    r = _harness("devices", "--file", str(devices))
    assert r.returncode == 4, r.stderr[-2000:]
    assert str(devices) in r.stderr and "aliases expand" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("key", ["name", "timeout_s"])
def test_an_alias_bomb_in_a_plan_is_exit_4(tmp_path: Path, key: str) -> None:
    plan = tmp_path / "plan.yaml"
    tail = "models: {m: {path: /tmp}}\noptions: {runtime_dir: /tmp}\nsuites: [{name: s, runner: llm_demo, models: [m]}]\n"
    if key == "name":
        plan.write_text(f"name:\n{_bomb('  ')}{tail}")
    else:  # an export's timeout_s
        plan.write_text("exports:\n  builds:\n    - model: m\n      command: [x, '{out}']\n      targets: [SM8650]\n"
                        f"      formats: [a]\n      timeout_s:\n{_bomb('        ')}{tail}")
    assert len(plan.read_bytes()) < 1024
    r = _harness("export", "--plan", str(plan), "--out", str(tmp_path / "out"))
    assert r.returncode == 4, r.stderr[-2000:]
    assert str(plan) in r.stderr and "aliases expand" in r.stderr and "Traceback" not in r.stderr


def test_a_few_aliases_still_load_and_a_wrong_value_is_shown_cut(tmp_path: Path) -> None:
    from harness.validation import load_yaml

    data = load_yaml("base: &b {soc: SM8650, work_dir: /data/local/tmp/h}\ndevices: [*b, *b, *b]\n")
    assert data["devices"][2]["soc"] == "SM8650"
    text = shown([["x" * 500] * 50] * 50)
    assert len(text) < 200
