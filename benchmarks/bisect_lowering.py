"""The export axis with ExecuTorch's real QNN lowering: a 12-commit recipe repository around
examples/et_qnn/lower_decoder.py whose commit 7 plants the MUL-range fault (lower_decoder.py's
`--plant-mul-range-fault 0`, plant_fault.py's fault), each step's export through the night's export cache
(harness/bisect/recipe.py). Measures a step's export built (a real lowering, QAIRT's HTP
compiler) against the same export served from the cache, and that the fault's commit changes the
program (its sha256) while a commit that does not touch the recipe's inputs is a cache hit.

    nice -n 10 python benchmarks/bisect_step.py --real-lowering
(needs the executorch and qnn extras; run by benchmarks/bisect_step.py)"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WRAPPER = '''"""The recipe: lower_decoder.py with the settings of this commit."""
import json, runpy, sys
from pathlib import Path
here = Path(__file__).resolve().parent
s = json.loads((here / "settings.json").read_text())
extra = ["--plant-mul-range-fault", str(s["fault_layer"])] if s.get("fault_layer") is not None else []
sys.argv = ["lower_decoder.py", *sys.argv[1:], "--mlp", "swiglu", *extra]
sys.path.insert(0, str(here))
runpy.run_path(str(here / "lower_decoder.py"), run_name="__main__")
'''


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def make_repo(repo: Path, n: int = 12, fault_at: int = 7) -> list[str]:
    rec = repo / "recipe"
    rec.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    for name in ("lower_decoder.py", "plant_fault.py"):
        shutil.copy(REPO / "examples" / "et_qnn" / name, rec / name)
    (rec / "export.py").write_text(WRAPPER)
    (repo / "NOTES.md").write_text("")
    shas = []
    for i in range(n):
        if i in (3, 9):  # commits that touch nothing the build reads: the same key, a cache hit
            (repo / "NOTES.md").write_text(f"note {i}\n")
        else:
            (rec / "settings.json").write_text(json.dumps({"revision": i, "fault_layer": 0 if i >= fault_at
                                                           else None}))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "plant the MUL-range fault" if i == fault_at else f"recipe {i}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return shas


def _program_sha(folder: Path) -> str:
    ptes = sorted(folder.rglob("*.pte"))
    return hashlib.sha256(b"".join(p.read_bytes() for p in ptes)).hexdigest()[:16] if ptes else "-"


def run_real(tmp: Path) -> None:
    from harness.bisect.recipe import Exporter, RecipeRepo, build_at
    from harness.lab.plan import ExportBuild, Target

    shas = make_repo(tmp / "repo")
    build = ExportBuild(model="tiny", kind="executorch", targets=("SM8650",), formats=("16a8w",),
                        command=("python", "recipe/export.py", "--soc", "{soc}", "--format", "{format}", "--out",
                                 "{out}"),
                        inputs=(tmp / "repo" / "recipe",), cwd=tmp / "repo", qnn_host=True, timeout_s=1800)
    repo = RecipeRepo.of_inputs(build)
    exporter = Exporter(None, tmp / "logs", threading.Event())
    target = Target.of("SM8650")
    assert target is not None
    rows = []
    for i in (6, 8, 9, 8):  # built, built (the fault), a hit by content (commit 9 = commit 8's inputs), a hit again
        tree = repo.checkout(shas[i], tmp / "trees" / shas[i][:12])
        started = time.monotonic()
        result = exporter.export(build_at(build, repo, tree), target, "16a8w", keyed_as=build)
        took = time.monotonic() - started
        rows.append((i, result.cache.value, took, _program_sha(result.folder) if result.folder else result.reason()))
        print(f"commit {i:2d} {shas[i][:10]}: export {result.cache.value:<5} {took:8.2f} s  program {rows[-1][3]}",
              flush=True)
    built = [t for _, use, t, _ in rows if use != "hit"]
    hits = [t for _, use, t, _ in rows if use == "hit"]
    print(f"a step's export: built {sum(built) / max(1, len(built)):.1f} s, from the cache "
          f"{sum(hits) / max(1, len(hits)):.2f} s")
