"""The export stage keeps an export's float reference (docs/executorch-reference.md) with the
export: the cache seals reference/ with the program, and an entry whose reference changed after
sealing is not used."""

from __future__ import annotations

from pathlib import Path

from harness.lab.exports import ExportCache
from harness.provision import HashCache


def _sealed(tmp_path: Path) -> tuple[ExportCache, Path]:
    cache = ExportCache(tmp_path / "cache", HashCache())
    build = cache.new_build_dir("k1")
    out = build / "out"
    (out / "reference").mkdir(parents=True)
    (out / "model.pte").write_bytes(b"pte")
    (out / "reference" / "reference.json").write_text('{"schema": "et-reference/1"}')
    (out / "reference" / "p0.npy").write_bytes(b"logits")
    (build / "export.log").write_text("ok\n")
    entry = cache.commit("k1", build, {"status": "passed"})
    return cache, entry.out


def test_the_cache_seals_the_reference_with_the_program(tmp_path: Path) -> None:
    cache, out = _sealed(tmp_path)
    entry, why = cache.lookup("k1")
    assert entry is not None and why == ""
    assert {"reference/reference.json", "reference/p0.npy", "model.pte"} <= set(entry.data["files"])


def test_a_reference_changed_after_sealing_is_not_used(tmp_path: Path) -> None:
    cache, out = _sealed(tmp_path)
    (out / "reference" / "p0.npy").write_bytes(b"other logits")
    entry, why = cache.lookup("k1")
    assert entry is None and "files differ" in why
