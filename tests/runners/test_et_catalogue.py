"""An ExecuTorch suite's --model-dir read per format: ../shared's host QNN material per SoC
(runner-ready KV programs before forward ones, the profiled build with its twin's input), a
folder of exports, one export."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ArtifactError
from harness.runners.executorch import ArtifactKind, read_catalogue
from tests.shared import SHARED

REPO = Path(__file__).resolve().parents[2]
QNN_HOST = SHARED / "models" / "et-qnn-host"


@pytest.mark.skipif(not (QNN_HOST / "pte").is_dir(), reason="../shared/models/et-qnn-host is absent")
def test_host_material_per_soc() -> None:
    sm8650 = read_catalogue(QNN_HOST, "SM8650")
    kinds = {k: (a.kind, a.pte.name if a.pte else None) for k, a in sm8650.formats.items()}
    assert kinds == {"16a4w": (ArtifactKind.FORWARD, "qwen3-16a4w-sm8650.pte"),
                     "8a8w": (ArtifactKind.FORWARD, "qwen3-8a8w-sm8650.pte"),
                     "16a8w": (ArtifactKind.LLM, "kv-16a8w-sm8650.pte")}
    assert sm8650.profiled is not None and sm8650.profiled.pte is not None
    assert sm8650.profiled.pte.name == "qwen3-16a4w-sm8650-prof2.pte"
    assert [p.name for p in sm8650.profiled.inputs] == ["qwen3-16a4w-sm8650.input.npy"]
    assert "no 16a16w program" in sm8650.missing_reason("16a16w") and "SM8650" in sm8650.missing_reason("16a16w")
    v68 = read_catalogue(QNN_HOST, "SA8295")
    assert list(v68.formats) == ["8a8w"] and v68.profiled is None  # only 8a8w builds on v68
    assert read_catalogue(QNN_HOST, "SM8750").formats == {}
    assert not sm8650.cpu_exports()


def test_a_folder_of_exports_and_a_missing_folder(tmp_path: Path) -> None:
    for name in ("16a4w", "xnnpack"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.pte").write_bytes(b"ET12")
        (tmp_path / name / "tokenizer.json").write_text("{}")
    cat = read_catalogue(tmp_path, "SM8650")
    assert sorted(cat.formats) == ["16a4w", "xnnpack"]
    assert all(a.kind is ArtifactKind.EXPORT and a.tokenizer is not None for a in cat.formats.values())
    with pytest.raises(ArtifactError, match="not a folder"):
        read_catalogue(tmp_path / "absent", None)
