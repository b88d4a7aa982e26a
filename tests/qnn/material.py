"""Where the tests over real QNN find their material: the host's QAIRT libraries (the
onnxruntime-qnn wheel, the `qnn` extra) and ../shared/models/et-qnn-host (context binaries,
PTEs and logs made with ExecuTorch 1.5.1 on QAIRT 2.49.40). Each helper skips with the reason
when its material is absent."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """$HARNESS_SHARED_DIR, else ../shared beside the checkout (or beside the folder of worktrees)."""
    if os.environ.get("HARNESS_SHARED_DIR"):
        return Path(os.environ["HARNESS_SHARED_DIR"])
    for cand in (REPO.parent / "shared", REPO.parent.parent / "shared"):
        if cand.is_dir():
            return cand
    return REPO.parent / "shared"


ET_QNN = shared_dir() / "models" / "et-qnn-host"


def et_qnn_or_skip(*parts: str) -> Path:
    path = ET_QNN.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: this test reads the real QNN material of ../shared/models/et-qnn-host")
    return path


def wheel_or_skip() -> None:
    if importlib.util.find_spec("onnxruntime_qnn") is None:
        pytest.skip("onnxruntime_qnn is not installed (the qnn extra: pip install 'harness[qnn]')")


def emulator_extras_or_skip() -> None:
    """The emulated HTP's two extras: ExecuTorch's pybindings (its QnnBackend) and the QAIRT wheel."""
    for mod, extra in (("executorch.extension.pybindings.portable_lib", "executorch"), ("onnxruntime_qnn", "qnn")):
        try:
            found = importlib.util.find_spec(mod)
        except ModuleNotFoundError:
            found = None
        if found is None:
            pytest.skip(f"the emulated HTP needs the optional `{extra}` extra (pip install 'harness[{extra}]')")
