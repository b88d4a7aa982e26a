"""A float reference declared for a folder of exports rather than by a plan build (pytest's
`--reference-checkpoint/--reference-params/--reference-tokenizer`,
docs/etllama.md#declaring-the-reference-for-a-folder-pytest): built exactly as the night builds a
build's `reference:`, as an export of its own in the export cache (its testcase
`test_export[<name>-reference]`, a hit once built), and read from there: the user's export folder is never written."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from harness.lab.exports.cache import default_cache_root
from harness.lab.exports.results import ExportResult
from harness.lab.exports.stage import run_export_stage
from harness.lab.plan import ExportBuild, ExportsSpec, ReferenceSpec, Target

# The reference is the same for every target (its cache key names none); a job still has one.
_ANY_TARGET = "SM8650"


def build_declared_reference(reference: ReferenceSpec, name: str, out_dir: Path, *, soc: str | None = None,
                             say: Callable[[str], None] = lambda _: None, run_id: str = "pytest",
                             cache_root: Path | None = None) -> ExportResult:
    """The float reference of `name`'s programs, from the checkpoint, params and tokenizer they were
    exported from; the result's folder holds reference/ when it passed."""
    target = soc if soc is not None and Target.of(soc) is not None else _ANY_TARGET
    build = ExportBuild(model=name, command=(), targets=(target,), formats=(), reference=reference,
                        label="--reference-checkpoint")
    stage = run_export_stage(ExportsSpec((build,)), [], out_dir, stop=threading.Event(), say=say, run_id=run_id,
                             cache_root=cache_root or default_cache_root())
    return stage.results[0]


__all__ = ["build_declared_reference"]
