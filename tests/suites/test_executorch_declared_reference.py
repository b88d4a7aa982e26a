"""A float reference declared for a folder in pytest (--reference-checkpoint, --reference-params,
--reference-tokenizer; docs/etllama.md#declaring-the-reference-for-a-folder-pytest): all three or none (a usage error,
exit 4, naming what is missing), its testcase test_export[<folder>-reference] collected only when
declared, and built as the night builds a plan build's `reference:`: an export of its own in the
export cache, a hit the second time, the user's folder untouched. The reference is real, on the
tiny GGUF's checkpoint (no lowering)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.checks import read_float_reference
from harness.evidence import CacheUse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "etllama"))
import tinygguf  # noqa: E402


def _pytest(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest", "suites/executorch_qnn", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("gguf", reason="the gguf extra is not installed: pip install 'harness[gguf]'")
    from harness.etllama.gguf_checkpoint import convert

    tmp = tmp_path_factory.mktemp("declared")
    tinygguf.write(tmp / "tiny.gguf")
    return convert(tmp / "tiny.gguf", tmp / "ck").folder


def _files(ck: Path) -> list[str]:
    return ["--reference-checkpoint", str(ck / "checkpoint.pth"), "--reference-params", str(ck / "params.json"),
            "--reference-tokenizer", str(ck / "tokenizer.json")]


def test_a_partial_declaration_is_a_usage_error(checkpoint: Path) -> None:
    proc = _pytest("--co", *_files(checkpoint)[:4])  # the checkpoint and params, no tokenizer
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "a declared float reference needs --reference-tokenizer too" in proc.stderr


def test_the_reference_testcase_is_collected_only_when_declared(checkpoint: Path, tmp_path: Path) -> None:
    folder = tmp_path / "my-export"
    folder.mkdir()
    declared = _pytest("--co", "-q", "--model-dir", str(folder), *_files(checkpoint))
    assert "test_export[my-export-reference]" in declared.stdout, declared.stdout[-2000:] + declared.stderr[-2000:]
    plain = _pytest("--co", "-q", "--model-dir", str(folder))
    assert "test_export[" not in plain.stdout and plain.returncode == 0, plain.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.heavy  # 50 s at load 15 (as tests/lab/test_exports_reference.py's stage build: make test-heavy)
@pytest.mark.timeout(900)  # the reference builder imports ExecuTorch in its own process
def test_the_declared_reference_is_an_export_of_its_own_cached(checkpoint: Path, tmp_path: Path) -> None:
    pytest.importorskip("executorch", reason="the executorch extra is not installed")
    from harness.lab.exports import build_declared_reference
    from harness.lab.plan import ReferenceSpec

    prompts = tmp_path / "prompts.txt"
    prompts.write_text("What is the capital of France?\n")
    spec = ReferenceSpec(checkpoint / "checkpoint.pth", checkpoint / "params.json", checkpoint / "tokenizer.json",
                         new_tokens=2, prompts=prompts)
    before = sorted(p.name for p in checkpoint.iterdir())
    built = build_declared_reference(spec, "my-export", tmp_path / "a", soc="SM8650", cache_root=tmp_path / "cache")
    assert built.ok and built.folder is not None, (built.failure, built.log_tail)
    assert built.job.testcase == "test_export[my-export-reference]"
    found = read_float_reference(built.folder)
    assert found is not None and len(found.prompts) == 1
    assert len(found.prompts[0].tokens) == found.prompts[0].prompt_tokens + 2
    again = build_declared_reference(spec, "my-export", tmp_path / "b", cache_root=tmp_path / "cache")
    assert again.cache is CacheUse.HIT and again.folder == built.folder
    assert sorted(p.name for p in checkpoint.iterdir()) == before  # what it was built from is only read
