"""The example decoder's real lowerings (examples/et_qnn: lower_decoder.py, plant_fault.py), each made
at most once per test session and shared by every test that uses it: the float-reference suite tests
(model.pte + reference/, healthy and with the seed fault planted), the localization tests (the debug
build, healthy and faulty) and whatever new test needs one.

How a test gets one (tests/conftest.py):
  - the session fixtures `localize_debug_export`, `localize_fault_export`, `float_reference_exports`;
  - a new lowering: a `Decoder` constant here, a session fixture in tests/conftest.py returning
    `example_decoders.path(THAT)`, and the fixture's name in `NEEDS` (so the session's first use
    builds it in the same child as the others the selected tests need, and its tests get the
    lowering's time budget). Keep the shape tiny; reuse a constant when the test can.
A lowering is ~30 s of CPU alone, importing torch and ExecuTorch ~8 s more: the first fixture used builds
every lowering the selected tests need in one child (tests/localize_kit/lower_many.py), under a file lock
in the run's temp folder, so pytest-xdist workers build each once between them."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "et_qnn"
LOWER_MANY = Path(__file__).resolve().with_name("lower_many.py")
# One lowering alone takes ~30 s on an idle 2-core host; a loaded shared host has taken 15 minutes for two.
LOWERING_TIMEOUT_S = 900.0
# The time budget of a test that may be the one to build the session's lowerings (its setup does).
BUILD_BUDGET_S = 2400


@dataclass(frozen=True)
class Decoder:
    """One lowering of the example exporter: the program (model.pte + reference/) or its debug build
    (debug.pte, etrecord.bin, debug_inputs.npz, qnn_encodings.json), healthy or with the seed fault
    planted at `fault_layer` (that layer's SwiGLU MUL output takes its SiLU operand's range)."""

    soc: str = "SM8650"
    fmt: str = "16a8w"
    layers: int = 2
    dim: int = 64
    mlp: str = "swiglu"
    debug: bool = False
    fault_layer: int | None = None

    def script(self) -> Path:
        # plant_fault.py plants into the program; the debug build plants through its own argument
        return EXAMPLE / ("plant_fault.py" if self.fault_layer is not None and not self.debug else "lower_decoder.py")

    def args(self, out: Path) -> list[str]:
        """The exporter's command line (after the script) writing into `out`."""
        argv = ["--soc", self.soc, "--format", self.fmt, "--layers", str(self.layers), "--dim", str(self.dim),
                "--mlp", self.mlp, "--out", str(out)]
        if self.debug:
            argv.append("--debug-program")
            if self.fault_layer is not None:
                argv += ["--plant-mul-range-fault", str(self.fault_layer)]
        elif self.fault_layer is not None:
            argv += ["--fault-layer", str(self.fault_layer)]
        return argv

    def folder(self) -> str:
        kind = "debug" if self.debug else "pte"
        fault = "healthy" if self.fault_layer is None else f"fault{self.fault_layer}"
        return f"{self.soc.lower()}-{self.fmt}-l{self.layers}-d{self.dim}-{self.mlp}-{kind}-{fault}"


# The session's lowerings (all of one model: SM8650, 16a8w, 2 SwiGLU layers x dim 64).
MODEL = Decoder()
MODEL_FAULT = Decoder(fault_layer=1)
DEBUG = Decoder(debug=True)
DEBUG_FAULT = Decoder(debug=True, fault_layer=1)

# Which session fixture (tests/conftest.py) needs which lowerings: the first one used builds what the
# selected tests need, all in one child.
NEEDS: Mapping[str, tuple[Decoder, ...]] = {
    "localize_debug_export": (DEBUG,),
    "localize_fault_export": (DEBUG_FAULT,),
    "float_reference_exports": (MODEL, MODEL_FAULT),
}


def needed_by(items: Iterable[pytest.Item]) -> set[Decoder]:
    """The lowerings the selected tests use, through the fixtures of NEEDS."""
    return {spec for item in items for name in getattr(item, "fixturenames", ()) for spec in NEEDS.get(name, ())}


def uses_a_lowering(item: pytest.Item) -> bool:
    return any(name in NEEDS for name in getattr(item, "fixturenames", ()))


def run_build_dir(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test run's temp folder: the session's, or under pytest-xdist the one its workers' folders are in."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


def host_env() -> dict[str, str]:
    """The host's QAIRT on a child's loader path and this checkout on its PYTHONPATH; skips without the qnn extra."""
    for module in ("executorch", "onnxruntime_qnn"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"the qnn extra is not installed ({module} missing): pip install 'harness[qnn]'")
    from harness.qnn import QnnUnavailable, find_host_qnn

    try:
        host = find_host_qnn()
    except QnnUnavailable as exc:
        pytest.skip(str(exc))
    env = host.child_env(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


class DecoderBuilds:
    """The run's lowerings under `root` (one folder each, written under a temp name and renamed). `wanted`:
    what the selected tests need, built together by the first `path()` that finds one missing."""

    def __init__(self, root: Path, wanted: Iterable[Decoder]) -> None:
        self.root = root
        self.wanted = set(wanted)
        self._failed: dict[Decoder, str] = {}  # a failed lowering is reported again, never re-run

    def path(self, spec: Decoder) -> Path:
        """The lowering's folder (`<name>/<format>/`: its parent is a --model-dir), built with the others
        missing when absent."""
        out = self.root / spec.folder() / spec.fmt
        if spec in self._failed:
            pytest.fail(self._failed[spec], pytrace=False)
        if not out.is_dir():
            env = host_env()
            self.root.mkdir(parents=True, exist_ok=True)
            with (self.root / ".lock").open("w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # another xdist worker may be building them
                missing = sorted((s for s in self.wanted | {spec} if not (self.root / s.folder()).is_dir()
                                  and s not in self._failed), key=lambda s: (s != spec, s.folder()))
                if missing:
                    self._build(missing, env)
        if spec in self._failed:
            pytest.fail(self._failed[spec], pytrace=False)
        return out

    def _build(self, specs: list[Decoder], env: Mapping[str, str]) -> None:
        jobs = [{"script": str(s.script()), "args": s.args(self._tmp(s) / s.fmt), "tmp": str(self._tmp(s)),
                 "out": str(self.root / s.folder())} for s in specs]
        try:
            proc = subprocess.run([sys.executable, str(LOWER_MANY), json.dumps(jobs)], capture_output=True, text=True,
                                  env=dict(env), timeout=LOWERING_TIMEOUT_S * len(specs), check=False)
            tail = (proc.stdout + proc.stderr)[-3000:]
        except subprocess.TimeoutExpired:
            tail = f"the lowering child ran over {LOWERING_TIMEOUT_S * len(specs):.0f} s"
        for spec in specs:
            if not (self.root / spec.folder()).is_dir():
                err = self._tmp(spec).with_name(self._tmp(spec).name + ".err")
                why = (err.read_text() + "\n" if err.is_file() else "") + tail
                err.unlink(missing_ok=True)
                self._failed[spec] = f"lowering {spec.script().name} {' '.join(spec.args(self._tmp(spec) / spec.fmt))} failed:\n{why}"

    def _tmp(self, spec: Decoder) -> Path:
        return self.root / f".{spec.folder()}.{os.getpid()}.tmp"
