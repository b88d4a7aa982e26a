"""Calibration of the float-reference check (harness/checks/float_reference.py,
docs/executorch-reference.md#calibration): real lowerings of examples/et_qnn/lower_decoder.py's
SwiGLU decoder (random weights: near-tied logits) for each shape x format, healthy and with the
seed's fault planted (examples/et_qnn/plant_fault.py: one layer's SwiGLU MUL output quantized
with its operand's range), each run teacher-forced over its reference's tokens on QAIRT's x86
HTP emulator; prints each program's figures against its own float model and the verdict the
current lines give.

    python benchmarks/et_reference_calibration.py [--work DIR] [--soc SM8650]

Lowerings are kept in --work (default ~/.cache/harness/et-reference-calibration) and reused.
Needs the `qnn` extra. Takes ~30 s a lowering and ~8 s a run on a 2-core host.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.checks import judge_float_reference, read_float_reference  # noqa: E402
from harness.qnn import find_host_qnn  # noqa: E402

SHAPES = {"2x64": ["--layers", "2", "--dim", "64", "--heads", "2"],
          "4x128": ["--layers", "4", "--dim", "128", "--heads", "4"]}
FAULT_LAYER = {"2x64": 1, "4x128": 2}
FORMATS = ("16a4w", "16a8w", "8a8w")


def lower(work: Path, env: dict[str, str], soc: str, shape: str, fmt: str, faulty: bool) -> Path:
    out = work / f"{soc}-{shape}-{fmt}-{'fault' if faulty else 'healthy'}"
    if (out / "model.pte").is_file() and (out / "reference" / "reference.json").is_file():
        return out
    script = REPO / "examples" / "et_qnn" / ("plant_fault.py" if faulty else "lower_decoder.py")
    argv = [sys.executable, str(script), "--soc", soc, "--format", fmt, "--out", str(out), "--mlp", "swiglu",
            *SHAPES[shape], *(["--fault-layer", str(FAULT_LAYER[shape])] if faulty else [])]
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def run(export: Path, env: dict[str, str]) -> np.ndarray:
    ref = read_float_reference(export)
    assert ref is not None
    tokens, output = export / "tokens.calib.npy", export / "logits.calib.npy"
    np.save(tokens, ref.token_matrix())
    subprocess.run([sys.executable, "-m", "harness.hostrt.executorch.forward", "--model_path", str(export / "model.pte"),
                    "--tokens", str(tokens), "--output", str(output)], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return np.load(output)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "harness" / "et-reference-calibration")
    ap.add_argument("--soc", default="SM8650")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    env = find_host_qnn().child_env({**os.environ, "PYTHONPATH": str(REPO)})
    print("| shape | format | program | verdict | KL median (worst) | flips median (worst) | NLL gap median (worst) |")
    print("|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        for fmt in FORMATS:
            for faulty in (False, True):
                export = lower(args.work, env, args.soc, shape, fmt, faulty)
                ref = read_float_reference(export)
                assert ref is not None
                agreement = judge_float_reference(ref, run(export, env), label=fmt)
                name = f"fault at layer {FAULT_LAYER[shape]}" if faulty else "healthy"
                print(f"| {shape} | {fmt} | {name} | {agreement.verdict} | {agreement.median_kl:.4f} "
                      f"({agreement.worst_kl:.4f}) | {agreement.median_flip_share:.0%} ({agreement.worst_flip_share:.0%}) "
                      f"| {agreement.median_nll_gap:.4f} ({agreement.worst_nll_gap:.4f}) |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
