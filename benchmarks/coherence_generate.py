"""Make real outputs of the activation-saturation fault for the coherence checker's new-prompt set.

    python benchmarks/coherence_generate.py WORKDIR PROMPTS.txt OUT.jsonl \
        [--model DIR] [--runtime DIR] [--cond NAME:SAMPLER ...]

How the fault is made (docs/coherence.md): the SmolLM2 export in ../shared/models carries, for each
MLP `gate * up` Mul, the 16-bit quantization range the NPU would use (`extraTensorDescribe`
quantInfo in its graph). In 27 of 30 blocks that range is the `up` operand's, not the product's:
the activation-saturation fault. The CPU backend ignores quantInfo, so this script writes a copy
of the graph with a fake-quant after the chosen Muls (clamp to the range, round to its step:
MAXIMUM, MINIMUM, MUL, ROUND, MUL), converts it back with the mnn package's converter
(`harness.mnn_graph.build_mnn`; a round trip of the untouched graph is byte-identical) and runs
the real `llm_demo` on every prompt, one process per prompt so each answer is cut out of stdout on its own.

Conditions (folder:sampler; sampler `greedy` or the export's own `sampled`):
- `base`: the export as shipped (CPU, no fake-quant) - the reference;
- `calibrated`: every Mul fake-quantized with a range that holds all products (healthy a16);
- `sat_B1_B2...`: the export's own ranges on blocks B1, B2... (one block: fluent drift;
  all 27: token soup).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.mnn_graph import build_mnn

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / ".." / "shared" / "models" / "smollm2-135m-instruct-mnn-npu16"
RUNTIME = ROOT / ".." / "shared" / "runtimes" / "mnn-x86_64"
LINKED = ("llm.mnn.weight", "embeddings_bf16.bin", "llm_config.json", "tokenizer.mtok")
DEFAULT_CONDS = ("base:greedy", "base:sampled", "calibrated:greedy", "sat_0:greedy", "sat_3:greedy",
                 "sat_20:greedy", "sat_3_4_5:greedy", "sat_10:sampled", "sat_10_15_20_25:greedy")


def _range(quant: dict[int, Any], index: int) -> tuple[float, float, float]:
    q = quant[index]
    s = q["scale"]
    return s * (q["min"] - q["zero"]), s * (q["max"] - q["zero"]), s


def fake_quant_graph(graph: dict[str, Any], mode: str, blocks: set[int] | None) -> dict[str, Any]:
    """Insert clamp+round after each chosen `/blocks.N/mlp/Mul` (mode `export` or `calibrated`)."""
    quant = {e["index"]: e.get("quantInfo") for e in graph["extraTensorDescribe"]}
    names: list[str] = graph["tensorName"]

    def tensor(name: str) -> int:
        names.append(name)
        return len(names) - 1

    def op(name: str, kind: str, main: dict[str, Any], inputs: list[int] | None) -> tuple[int, dict]:
        t = tensor(name)
        o: dict[str, Any] = {"main_type": kind, "main": main, "name": name, "outputIndexes": [t],
                             "type": "Const" if kind == "Blob" else kind, "defaultDimentionFormat": "NHWC"}
        if inputs is not None:
            o["inputIndexes"] = inputs
        return t, o

    def const(name: str, v: float) -> tuple[int, dict]:
        return op(name, "Blob", {"dims": [], "dataFormat": "NCHW", "dataType": "DT_FLOAT",
                                 "float32s": [v]}, None)

    def binary(name: str, kind: str, a: int, b: int) -> tuple[int, dict]:
        return op(name, "BinaryOp", {"opType": kind, "T": "DT_FLOAT", "activationType": 0}, [a, b])

    out_ops: list[dict[str, Any]] = []
    remap: dict[int, int] = {}
    for o in graph["oplists"]:
        if "inputIndexes" in o:
            o["inputIndexes"] = [remap.get(i, i) for i in o["inputIndexes"]]
        out_ops.append(o)
        if not o["name"].endswith("/mlp/Mul_output_0"):
            continue
        block = int(o["name"].split("/")[1].split(".")[1])
        if blocks is not None and block not in blocks:
            continue
        a, b = o["inputIndexes"]
        c = o["outputIndexes"][0]
        if mode == "export":
            lo, hi, step = _range(quant, c)        # what the export tells the NPU
        else:                                       # a range that holds every product
            alo, ahi, _ = _range(quant, a)
            blo, bhi, _ = _range(quant, b)
            products = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
            lo, hi = min(products), max(products)
            step = (hi - lo) / 65534
        base = o["name"] + "/fq"
        t_lo, c_lo = const(base + "/lo", lo)
        t_hi, c_hi = const(base + "/hi", hi)
        t_inv, c_inv = const(base + "/inv", 1.0 / step)
        t_s, c_s = const(base + "/s", step)
        t1, o1 = binary(base + "/max", "MAXIMUM", c, t_lo)
        t2, o2 = binary(base + "/min", "MINIMUM", t1, t_hi)
        t3, o3 = binary(base + "/div", "MUL", t2, t_inv)
        t4, o4 = op(base + "/round", "UnaryOp", {"opType": "ROUND", "T": "DT_FLOAT"}, [t3])
        t5, o5 = binary(base + "/mul", "MUL", t4, t_s)
        out_ops += [c_lo, c_hi, c_inv, c_s, o1, o2, o3, o4, o5]
        remap[c] = t5
    graph["oplists"] = out_ops
    return graph


def prepare(work: Path, model: Path, folder: str) -> Path:
    """WORK/folder with greedy.json and sampled.json configs over the export (graph rewritten).
    WORK is the caller's scratch folder: the export itself is only read."""
    dst = work / folder
    if (dst / "greedy.json").exists():
        return dst
    dst.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        (dst / name).unlink(missing_ok=True)
        (dst / name).symlink_to((model / name).resolve())
    if folder == "base":
        shutil.copy(model / "llm.mnn", dst / "llm.mnn")
    else:
        with gzip.open(model / "llm.mnn.json.gz", "rt") as fh:
            graph = json.load(fh)
        if folder == "calibrated":
            graph = fake_quant_graph(graph, "calibrated", None)
        elif folder.startswith("sat_"):
            graph = fake_quant_graph(graph, "export", {int(b) for b in folder[4:].split("_")})
        else:
            raise SystemExit(f"unknown condition folder {folder!r} (base, calibrated, sat_N[_M...])")
        (dst / "llm.json").write_text(json.dumps(graph))
        build_mnn(dst / "llm.json", dst / "llm.mnn")   # in-process converter, never the console script
        (dst / "llm.json").unlink()
    cfg = json.loads((model / "config.json").read_text())
    cfg["thread_num"] = 1
    (dst / "sampled.json").write_text(json.dumps(cfg))
    (dst / "greedy.json").write_text(json.dumps(dict(cfg, sampler_type="greedy")))
    return dst


def answer(runtime: Path, config: Path, prompt: str, max_tokens: int) -> str:
    """The text llm_demo prints for one prompt (between 'prompt file is' and its summary block)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(prompt + "\n")
    try:
        env = dict(os.environ, LD_LIBRARY_PATH=str(runtime))
        out = subprocess.run([str(runtime / "llm_demo"), str(config), fh.name, str(max_tokens)],
                             capture_output=True, text=True, errors="replace", env=env, check=True).stdout
    finally:
        os.unlink(fh.name)
    start = out.index("\n", out.index("prompt file is ")) + 1
    return out[start:out.index("\n#################################", start)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", type=Path)
    ap.add_argument("prompts", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--model", type=Path, default=MODEL)
    ap.add_argument("--runtime", type=Path, default=RUNTIME)
    ap.add_argument("--max-tokens", type=int, default=60)
    ap.add_argument("--cond", nargs="+", default=list(DEFAULT_CONDS))
    args = ap.parse_args()
    prompts = [p.strip() for p in args.prompts.read_text().splitlines() if p.strip()]
    with args.out.open("a", encoding="utf-8") as out:
        for cond in args.cond:
            folder, sampler = cond.rsplit(":", 1)
            cfg = prepare(args.workdir, args.model, folder) / f"{sampler}.json"
            for p in prompts:
                text = answer(args.runtime, cfg, p, args.max_tokens)
                out.write(json.dumps({"prompt": p, "text": text, "folder": folder, "sampler": sampler},
                                     ensure_ascii=False) + "\n")
                out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
