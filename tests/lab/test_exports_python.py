"""`python` / `python3` as an export command's first word is the interpreter the harness runs on
(issue 36: a venv's harness called by path, PATH's `python` without the harness's packages), for
an argv and a shell string; a plan that names another interpreter by path gets that one."""

from __future__ import annotations

import os
import sys

import pytest
from exportkit import FAKE, FAKE_ARGV, fake_env, run_stage, write_exports_plan

from harness.lab.plan import load_plan

WRONG = "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'harness'\" >&2\nexit 1\n"


def _wrong_pythons(tmp_path):
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("python", "python3"):
        (folder / name).write_text(WRONG)
        (folder / name).chmod(0o755)
    return folder


@pytest.mark.parametrize("word, shell", [("python", False), ("python3", False), ("python", True)])
def test_python_is_the_harness_interpreter(tmp_path, word, shell):
    wrong = _wrong_pythons(tmp_path)
    args = FAKE_ARGV[2:]
    command = " ".join([word, str(FAKE), *args]) if shell else [word, str(FAKE), *args]
    plan = load_plan(write_exports_plan(tmp_path, builds=[{
        "model": "tiny", "command": command, "shell": shell, "targets": ["SM8650"], "formats": ["8a8w"]}]))
    env = fake_env(tmp_path, PATH=f"{wrong}{os.pathsep}{os.environ.get('PATH', '')}")
    stage, _ = run_stage(plan, tmp_path, env=env)
    assert stage.results[0].ok, stage.records[0].message
    assert sys.executable in " ".join(stage.results[0].argv)


def test_an_interpreter_named_by_path_is_run_as_written(tmp_path):
    wrong = _wrong_pythons(tmp_path)
    plan = load_plan(write_exports_plan(tmp_path, builds=[{
        "model": "tiny", "command": [str(wrong / "python"), str(FAKE), *FAKE_ARGV[2:]], "targets": ["SM8650"],
        "formats": ["8a8w"]}]))
    stage, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path))
    rec = stage.records[0]
    assert rec.status == "failed" and "No module named 'harness'" in rec.message
