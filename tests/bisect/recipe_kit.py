"""A recipe repository of a test's own: a git history of `n` commits of an exporter whose export is
cheap (the virtual lab's Qwen3 export generator, 1 MB, stand-in QNN binaries) and one commit that
plants a fault the harness judges for real: the QNN pair's llm_demo crashes on the virtual phone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

EXPORTER = '''"""Exports tiny Qwen3 for one SoC (a recipe under test)."""
import argparse
import json
from pathlib import Path

from virtual_lab.exports import default_behaviour, make_qwen3_export

p = argparse.ArgumentParser()
p.add_argument("--soc-id", type=int, required=True)
p.add_argument("--arch", required=True)
p.add_argument("--out", required=True)
a = p.parse_args()
settings = json.loads((Path(__file__).parent / "settings.json").read_text())
behaviour = default_behaviour(False)
if settings.get("qnn_fault"):
    behaviour["prompts"].setdefault("", {}).setdefault("cpu/qnn", {})["fault"] = settings["qnn_fault"]
make_qwen3_export(Path(a.out), soc_id=a.soc_id, dsp_arch=a.arch, vtcm_mb=8, size_mb=1, behaviour=behaviour,
                  qnn_binaries="stand-in")
'''


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00", "GIT_COMMITTER_DATE":
           "2026-01-01T00:00:00", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def make_recipe_repo(repo: Path, n: int = 13, fault_at: int = 8) -> list[str]:
    """`n` commits (oldest first); commit `fault_at` (0-based) plants the crash, the later ones keep it."""
    (repo / "recipe").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "recipe" / "export.py").write_text(EXPORTER)
    shas = []
    for i in range(n):
        settings = {"revision": i, "qnn_fault": "crash" if i >= fault_at else None}
        (repo / "recipe" / "settings.json").write_text(json.dumps(settings, indent=1))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "plant the seed fault" if i == fault_at else f"recipe revision {i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas


def write_plan(path: Path, repo: Path, runtime_dir: Path, qnn_sdk: Path, device: str) -> Path:
    plan = {
        "name": "recipe-night", "devices": [device],
        "exports": {"parallel": 1, "builds": [{
            "model": "tiny", "kind": "mnn", "targets": ["SM8750"], "formats": ["w4a16"],
            "command": ["python", str(repo / "recipe" / "export.py"), "--soc-id", "{soc_id}", "--arch", "{dsp_arch}",
                        "--out", "{out}"],
            "inputs": [str(repo / "recipe")], "timeout_s": 300}]},
        "suites": [{"name": "qwen3", "runner": "llm_demo", "models": ["tiny"], "backends": ["qnn"],
                    "checks": ["generation"]}],
        "options": {"runtime_dir": str(runtime_dir), "qnn_sdk": str(qnn_sdk), "max_new_tokens": 16, "timeout_s": 120},
        "locks": {"wait_s": 30},
    }
    path.write_text(json.dumps(plan))
    return path
