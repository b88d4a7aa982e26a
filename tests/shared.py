"""Where the tests, benchmarks and fixture scripts find ../shared (the read-only material: real
exports, QNN material, MNN runtimes): $HARNESS_SHARED_DIR, else ../shared beside the checkout or
beside its folder of worktrees. HARNESS_SHARED, the old name, is read for one more release with a
FutureWarning (README, "Two commands")."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = "HARNESS_SHARED_DIR"
OLD_ENV = "HARNESS_SHARED"  # deprecated alias: remove in the release after this one


def shared_dir(environ: Mapping[str, str] = os.environ, repo: Path = REPO) -> Path:
    if environ.get(ENV):
        return Path(environ[ENV])
    if environ.get(OLD_ENV):
        warnings.warn(f"{OLD_ENV} is deprecated: set {ENV} instead (the old name is read until the next release)",
                      FutureWarning, stacklevel=2)
        return Path(environ[OLD_ENV])
    for cand in (repo.parent / "shared", repo.parent.parent / "shared"):
        if cand.is_dir():
            return cand
    return repo.parent / "shared"


SHARED = shared_dir()
