"""Calibration of the float-reference check (harness/checks/float_reference.py,
docs/executorch-reference.md#calibration): real lowerings of examples/et_qnn/lower_decoder.py's
SwiGLU decoder (random weights: near-tied logits) for each shape x format, healthy and with the
seed's fault planted at each of the shape's fault layers (examples/et_qnn/plant_fault.py: that
layer's SwiGLU MUL output quantized with its operand's range), each run teacher-forced over its
reference's tokens on QAIRT's x86 HTP emulator; prints each program's figures against its own
float model, the verdict the current lines give, and the healthy and fault bands per format.

    python benchmarks/et_reference_calibration.py [--work DIR] [--only 2x64 3x96] [--formats 16a8w]
        [--json OUT.jsonl]

The matrix (SHAPES): 2x64 and 4x128 for SM8650, 3x96 for SM8750, each healthy and with the fault
at its last layer (3x96: its first too), 16a4w/16a8w/8a8w: 21 lowerings. Lowerings are kept in
--work (default ~/.cache/harness/et-reference-calibration), keyed by the exporter's content, and reused; each is
written to a temporary folder and renamed, one at a time. Needs the `qnn` extra. ~30 s a lowering
and ~8 s a run on a 2-core host.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.checks import judge_float_reference, read_float_reference  # noqa: E402
from harness.qnn import find_host_qnn  # noqa: E402

EXAMPLE = REPO / "examples" / "et_qnn"
FORMATS = ("16a4w", "16a8w", "8a8w")


@dataclass(frozen=True)
class Shape:
    layers: int
    dim: int
    heads: int
    soc: str
    fault_layers: tuple[int, ...]

    def argv(self) -> list[str]:
        return ["--layers", str(self.layers), "--dim", str(self.dim), "--heads", str(self.heads), "--soc", self.soc]


SHAPES = {"2x64": Shape(2, 64, 2, "SM8650", (1,)),
          "4x128": Shape(4, 128, 4, "SM8650", (3,)),  # the last layer: the weakest fault (3x96: 0.4x the first's KL)
          "3x96": Shape(3, 96, 2, "SM8750", (0, 2))}


def exporter_digest() -> str:
    return hashlib.sha256(b"".join((EXAMPLE / f).read_bytes() for f in ("lower_decoder.py", "plant_fault.py"))).hexdigest()[:12]


def lower(work: Path, env: dict[str, str], shape: str, fmt: str, fault: int | None) -> Path:
    s = SHAPES[shape]
    out = work / exporter_digest() / f"{s.soc}-{shape}-{fmt}-{'healthy' if fault is None else f'fault{fault}'}"
    if (out / "build.json").is_file():
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    script = EXAMPLE / ("lower_decoder.py" if fault is None else "plant_fault.py")
    argv = [sys.executable, str(script), "--format", fmt, "--out", str(tmp), "--mlp", "swiglu", *s.argv(),
            *([] if fault is None else ["--fault-layer", str(fault)])]
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"lowering {out.name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    tmp.rename(out)
    return out


def run(export: Path, env: dict[str, str]) -> np.ndarray:
    ref = read_float_reference(export)
    assert ref is not None
    tokens, output = export / "tokens.calib.npy", export / "logits.calib.npy"
    if not output.is_file():
        np.save(tokens, ref.token_matrix())
        subprocess.run([sys.executable, "-m", "harness.hostrt.executorch.forward", "--model_path",
                        str(export / "model.pte"), "--tokens", str(tokens), "--output", str(output)],
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return np.load(output)


@dataclass(frozen=True)
class Row:
    shape: str
    soc: str
    format: str
    fault: int | None
    verdict: str
    median_kl: float
    worst_kl: float
    median_flips: float
    worst_flips: float
    median_nll_gap: float
    worst_nll_gap: float
    prompt_kl: tuple[float | None, ...]
    lowering_s: float | None

    def table_row(self) -> str:
        name = "healthy" if self.fault is None else f"fault at layer {self.fault}"
        return (f"| {self.shape} | {self.soc} | {self.format} | {name} | {self.verdict} | {self.median_kl:.4f} "
                f"({self.worst_kl:.4f}) | {self.median_flips:.0%} ({self.worst_flips:.0%}) "
                f"| {self.median_nll_gap:.4f} ({self.worst_nll_gap:.4f}) |")


def measure(export: Path, env: dict[str, str], shape: str, fmt: str, fault: int | None) -> Row:
    ref = read_float_reference(export)
    assert ref is not None
    ag = judge_float_reference(ref, run(export, env), label=fmt)
    build = json.loads((export / "build.json").read_text())
    figures = [ag.median_kl, ag.worst_kl, ag.median_flip_share, ag.worst_flip_share, ag.median_nll_gap, ag.worst_nll_gap]
    f = [x for x in figures if x is not None]
    if len(f) != len(figures):
        raise SystemExit(f"{export}: not compared ({ag.verdict}: {'; '.join(ag.reasons)})")
    return Row(shape, SHAPES[shape].soc, fmt, fault, ag.verdict, f[0], f[1], f[2], f[3], f[4], f[5],
               tuple(p.mean_kl for p in ag.prompts), build.get("t_total_s"))


def bands(rows: list[Row]) -> None:
    """Per format: the healthy band (median KL, max and the worst prompt) and the fault band (min)."""
    for fmt in sorted({r.format for r in rows}):
        healthy = [r for r in rows if r.format == fmt and r.fault is None]
        faults = [r for r in rows if r.format == fmt and r.fault is not None]
        if not healthy or not faults:
            continue
        hi, lo = max(r.median_kl for r in healthy), min(r.median_kl for r in faults)
        print(f"{fmt}: healthy median KL <= {hi:.4f} (worst prompt {max(r.worst_kl for r in healthy):.4f}); "
              f"faults >= {lo:.4f} (their median {statistics.median(r.median_kl for r in faults):.4f}); "
              f"ratio {lo / hi:.2f}, geometric middle {(lo * hi) ** 0.5:.4f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "harness" / "et-reference-calibration")
    ap.add_argument("--only", nargs="+", choices=sorted(SHAPES), default=list(SHAPES))
    ap.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    ap.add_argument("--json", type=Path, help="also write one JSON object a program to this file")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    env = find_host_qnn().child_env({**os.environ, "PYTHONPATH": str(REPO)})
    print("| shape | SoC | format | program | verdict | KL median (worst) | flips median (worst) | NLL gap median (worst) |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for shape in args.only:
        for fmt in args.formats:
            for fault in (None, *SHAPES[shape].fault_layers):
                rows.append(measure(lower(args.work, env, shape, fmt, fault), env, shape, fmt, fault))
                print(rows[-1].table_row(), flush=True)
    bands(rows)
    if args.json:
        args.json.write_text("".join(json.dumps(asdict(r)) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
