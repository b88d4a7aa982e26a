"""Lower a small KV-cache decoder to an ExecuTorch program delegated to QNN's HTP, for one SoC and
one quantization format: the example exporter of examples/et_qnn/nightly.yaml (the night's export
stage runs it once per (target, format); docs/exports.md).

Install (on an x86_64 Linux host, no phone, no SDK download):
    pip install 'harness[qnn]'      # executorch==1.5.1 and onnxruntime-qnn==2.5.0 (QAIRT 2.49.40)
The QNN libraries come from the onnxruntime-qnn wheel. This script does not look for them: it needs
QNN_SDK_ROOT (a folder whose lib/x86_64-linux-clang/ holds them) and LD_LIBRARY_PATH naming that
folder when it starts, which the harness's export stage sets for an entry with `qnn_host: true`
(harness/qnn/host.py). Without them it stops with exit code 3 and says so.

usage: python lower_decoder.py --soc SM8650 --format 16a4w --out DIR [--layers 1] [--dim 64]
writes DIR/model.pte (forward(tokens [1,1] int64, input_pos [1] int64) -> logits [1,1,V], the
KV-cache contract ExecuTorch's TextLLMRunner drives), DIR/tokenizer.json (one character a token),
DIR/export_args.json (soc_id, dsp_arch: the target the harness checks), DIR/build.json
(timings, delegation, versions, the eager model's greedy tokens for a prompt) and DIR/reference/: the
float model's reference on the suite's prompts (docs/executorch-reference.md: reference.json with each
prompt's tokens and greedy continuation, <id>.npy its teacher-forced per-step logits). QNN's own log
goes to stdout/stderr: the harness classifies a failed lowering from it.

It needs nothing of the harness (an exporter is the user's program): ExecuTorch, torch, numpy and
tokenizers only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

VOCAB = 128  # ids 0..94: the printable ASCII characters, the rest special tokens
BOS, EOS = 95, 96
FORMATS = ("16a4w", "16a8w", "8a8w", "16a16w")
PROMPT = "hello qnn"
CALIBRATION = "the quick brown fox jumps over the lazy dog " * 2
# The suite's prompts (docs/executorch-reference.md#prompts; the first is harness/suite/executorch/checks.py PROMPT).
REFERENCE_PROMPTS = ("What is the capital of France? Answer briefly.",
                     "List three colours of the rainbow.",
                     "Write one sentence about the sea.")
REFERENCE_NEW_TOKENS = 16
REFERENCE_SCHEMA = "et-reference/1"
SWIGLU_GAIN = 3.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--soc", required=True, help="QNN chipset name (SM8650, SM8750, SA8295, ...)")
    ap.add_argument("--format", required=True, choices=FORMATS, help="activation/weight bits")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=None, help="the MLP's hidden width (default: 2 x dim)")
    ap.add_argument("--weights", type=Path, default=None,
                    help="a torch state_dict of this decoder's layout (e.g. a trained model's first layers, "
                    "benchmarks/et_reference_calibration.py --gguf); default: seeded random weights")
    ap.add_argument("--reference-prompts", type=Path,
                    help="a text file of prompts, one a line, for reference/ (default: the suite's prompts)")
    ap.add_argument("--reference-new-tokens", type=int, default=REFERENCE_NEW_TOKENS,
                    help="greedy tokens of the float model per prompt in reference/")
    # The suites' prompt is ~50 characters (one token each) and runs with seq_len 128.
    ap.add_argument("--context", type=int, default=128, help="KV-cache length (max_seq_len)")
    ap.add_argument("--mlp", choices=("gelu", "swiglu"), default="gelu", help="the layers' MLP")
    ap.add_argument("--widen-layer", type=int, metavar="LAYER", default=None,
                    help="LAYER's MLP WIDEN times wider than the others' (one layer made heavier: its ops' "
                    "cycles rise, docs/executorch-runner.md#per-op-cycles-night-to-night)")
    ap.add_argument("--widen", type=int, default=8, help="how much wider --widen-layer's MLP is")
    ap.add_argument("--etrecord", action="store_true",
                    help="also write model.etrecord: names each QNN op's node, op and module in a profile")
    ap.add_argument("--debug-program", action="store_true",
                    help="write the debug program instead (debug.pte, etrecord.bin, qnn_encodings.json, "
                    "debug_inputs.npz): per-op intermediate outputs for harness.checks.localize")
    ap.add_argument("--plant-mul-range-fault", type=int, metavar="LAYER", default=None,
                    help="(tests) the SwiGLU MUL output of LAYER takes its SiLU operand's quantization range, "
                    "in the program and in its debug build (plant_fault.py)")
    return ap.parse_args(argv)


def check_qnn_env() -> Path:
    """The folder of QAIRT's x86 libraries, as the harness handed it over (exit 3 if not)."""
    root = os.environ.get("QNN_SDK_ROOT", "")
    lib = Path(root) / "lib" / "x86_64-linux-clang"
    if not root or not (lib / "libQnnHtp.so").is_file():
        print(f"lower_decoder: QNN SDK not found: QNN_SDK_ROOT={root!r} has no lib/x86_64-linux-clang/"
              "libQnnHtp.so; run me from a plan entry with `qnn_host: true` or set QNN_SDK_ROOT", file=sys.stderr)
        sys.exit(3)
    if str(lib) not in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        print(f"lower_decoder: warning: LD_LIBRARY_PATH does not name {lib}", file=sys.stderr)
    return lib


def build_model(args: argparse.Namespace):
    """A LayerNorm decoder with learned positions and a KV cache in mutable buffers: LayerNorm and
    the activation x activation matmuls are what HTP v68 refuses at 16-bit activations."""
    import torch
    from torch import nn

    class Layer(nn.Module):
        def __init__(self, index: int) -> None:
            super().__init__()
            d, h = args.dim, args.heads
            hidden = (args.hidden or 2 * d) * (getattr(args, "widen", 8) if getattr(args, "widen_layer", None) == index else 1)
            self.heads, self.head_dim = h, d // h
            self.ln_attn, self.ln_mlp = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.up, self.down = nn.Linear(d, hidden), nn.Linear(hidden, d)
            self.gate = nn.Linear(d, hidden) if args.mlp == "swiglu" else None
            self.register_buffer("keys", torch.zeros(1, h, args.context, d // h))
            self.register_buffer("values", torch.zeros(1, h, args.context, d // h))

        def forward(self, x, pos, bias):
            n = x.shape[1]  # tokens in this forward: 1 per decode step, the prompt in the debug program
            q, k, v = self.qkv(self.ln_attn(x)).split(args.dim, dim=-1)
            q, k, v = (t.view(1, n, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
            self.keys.index_copy_(2, pos, k)
            self.values.index_copy_(2, pos, v)
            scores = torch.matmul(q, self.keys.transpose(2, 3)) / self.head_dim ** 0.5 + bias
            mixed = torch.matmul(scores.softmax(-1), self.values).transpose(1, 2).reshape(1, n, args.dim)
            x = x + self.proj(mixed)
            h = self.ln_mlp(x)
            if self.gate is not None:  # SwiGLU: the activation x activation MUL MNN's seed fault is about
                return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))
            return x + self.down(nn.functional.gelu(self.up(h)))

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(VOCAB, args.dim)
            self.positions = nn.Embedding(args.context, args.dim)
            self.layers = nn.ModuleList(Layer(i) for i in range(args.layers))
            self.ln_out = nn.LayerNorm(args.dim)
            self.head = nn.Linear(args.dim, VOCAB)
            # row p masks the slots after position p with -255 (ExecuTorch's QNN llama,
            # masking_utils.PADDING_MASK_VALUE; -1e4 would make the masked scores' quantization step
            # 0.15 at 16 bits). Gathered by position, not computed from it: QNN quantizes a computed
            # `slots > pos` comparison's float position and masks wrong slots (measured: rows 2, 4,
            # 6 of a 16-token prefill masked their own token's slot)
            self.register_buffer("causal", torch.triu(torch.full((args.context, args.context), -255.0), 1),
                                 persistent=False)

        def forward(self, tokens, input_pos):
            x = self.tokens(tokens) + self.positions(input_pos)[None]
            bias = self.causal.index_select(0, input_pos)[None, None]  # future and unwritten slots
            for layer in self.layers:
                x = layer(x, input_pos, bias)
            return self.head(self.ln_out(x))

    torch.manual_seed(7)
    model = Decoder().eval()
    with torch.no_grad():  # random weights: keep the special tokens unlikely, so a run generates text
        model.head.bias[BOS] = model.head.bias[EOS] = -8.0
        for layer in model.layers if args.mlp == "swiglu" else ():
            # As in trained LLMs, the SwiGLU product spans a much wider range than SiLU's output
            # (issue 33's seed: [-19.4, 15.6] against [-0.28, 5.5]); default init keeps it narrow.
            layer.gate.weight.mul_(SWIGLU_GAIN)
            layer.up.weight.mul_(SWIGLU_GAIN)
    if args.weights is not None:  # trained weights replace all of it (strict: the layout must match)
        model.load_state_dict(torch.load(args.weights, weights_only=True), strict=True)
    return model


def encode(text: str) -> list[int]:
    return [ord(c) - 0x20 for c in text if 0x20 <= ord(c) < 0x7F]


def greedy(model, prompt_ids: list[int], new: int) -> list[int]:
    import torch

    out: list[int] = []
    with torch.no_grad():
        for pos in range(len(prompt_ids) + new - 1):
            tok = prompt_ids[pos] if pos < len(prompt_ids) else out[-1]
            logits = model(torch.tensor([[tok]]), torch.tensor([pos]))
            if pos >= len(prompt_ids) - 1:
                out.append(int(logits[0, -1].argmax()))
    return out


def reference_prompts(args: argparse.Namespace) -> list[str]:
    if args.reference_prompts is None:
        return list(REFERENCE_PROMPTS)
    return [ln for ln in args.reference_prompts.read_text(encoding="utf-8").splitlines() if ln.strip()]


def teacher_forced(model, tokens: list[int]):
    """The float model's logits at every position of `tokens` fed in order ([len-1, V] float32:
    row t is its distribution for tokens[t + 1]), from a fresh KV cache."""
    import torch

    rows = []
    with torch.no_grad():
        for pos, tok in enumerate(tokens[:-1]):
            rows.append(model(torch.tensor([[tok]]), torch.tensor([pos]))[0, -1].float())
    return torch.stack(rows).numpy()


def write_reference(model, out: Path, prompts: list[str], new_tokens: int) -> dict:
    """reference/: per prompt, its tokens + the float model's greedy continuation, and the
    teacher-forced logits over them (docs/executorch-reference.md). Written under a temp name
    and renamed, so a half-written reference is never read."""
    import shutil

    import numpy as np

    tmp = out / "reference.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    entries = []
    for i, text in enumerate(prompts):
        ids = encode(text)
        tokens = ids + greedy(model, ids, new_tokens)
        np.save(tmp / f"p{i}.npy", teacher_forced(model, tokens))
        entries.append({"id": f"p{i}", "text": text, "prompt_tokens": len(ids), "tokens": tokens,
                        "logits": f"p{i}.npy"})
    index = {"schema": REFERENCE_SCHEMA, "model": "float eager (torch), before quantization",
             "logits": "teacher-forced: row t is the distribution for tokens[t + 1]", "prompts": entries}
    (tmp / "reference.json").write_text(json.dumps(index, indent=1))
    shutil.rmtree(out / "reference", ignore_errors=True)
    tmp.rename(out / "reference")
    return {"prompts": len(entries), "new_tokens": new_tokens}


def write_tokenizer(path: Path) -> None:
    """A Hugging Face tokenizer.json of one token per printable character (no merges)."""
    from tokenizers import Tokenizer, models

    vocab = {chr(0x20 + i): i for i in range(95)}
    vocab.update({"<s>": BOS, "</s>": EOS})
    vocab.update({f"<extra{i}>": i for i in range(EOS + 1, VOCAB)})
    Tokenizer(models.BPE(vocab=vocab, merges=[])).save(str(path))


def quantize(model, chip, fmt: str, context: int, window: int = 1, before_convert=None):
    """Quantize for forwards of `window` tokens, calibrated on CALIBRATION in consecutive windows
    from position 0. The program decodes one token a step (window 1, QNN's default moving-average
    observer); the debug program prefills a window in one forward, calibrated with a MinMax observer
    so the ranges cover every calibrated position, the first window's too (its first token attends
    to one slot: softmax 1.0, which an average over later windows would clip)."""
    import torch
    from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer, QuantDtype
    from torchao.quantization.pt2e import MinMaxObserver
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = QnnQuantizer(soc_model=chip)
    quantizer.set_default_quant_config(getattr(QuantDtype, f"use_{fmt}"), is_linear_per_channel=True,
                                       act_observer=MinMaxObserver if window > 1 else None)
    calibration = encode(CALIBRATION)[:context]
    steps = [(calibration[s:s + window], list(range(s, s + window)))
             for s in range(0, len(calibration) - window + 1, window)]
    samples = [(torch.tensor([toks]), torch.tensor(pos)) for toks, pos in steps]
    prepared = prepare_pt2e(torch.export.export(model, samples[0], strict=False).module(), quantizer)
    with torch.no_grad():
        for sample in samples:
            prepared(*sample)
    if before_convert is not None:  # a developer's planted fault (examples/et_qnn/plant_fault.py)
        before_convert(prepared)
    return convert_pt2e(prepared), samples[0]


def soc_facts(soc: str) -> tuple[int, str]:
    """The SoC's id and HTP arch ("v75") from ExecuTorch's own table."""
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset, _soc_info_table

    chip = getattr(QcomChipset, soc)
    return int(chip.value), f"v{int(_soc_info_table[chip].htp_info.htp_arch)}"


def main(argv: list[str] | None = None, before_convert=None) -> int:
    args = parse_args(argv)
    check_qnn_env()
    args.out = args.out.resolve()  # a relative --out would be read again from inside itself after the chdir
    args.out.mkdir(parents=True, exist_ok=True)
    os.chdir(args.out)  # QNN may drop scratch files into the working folder
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # debug_program.py, plant_fault.py are beside it
    if args.debug_program:
        from debug_program import write_debug_program

        return write_debug_program(args, build_model, quantize)
    if before_convert is None and args.plant_mul_range_fault is not None:
        # the same fault in the program as in its debug build: one command plus --debug-program makes both
        from plant_fault import plant_mul_range

        before_convert = plant_mul_range(args.plant_mul_range_fault)
    started = time.monotonic()
    import importlib.metadata

    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec,
        generate_qnn_executorch_compiler_spec,
        to_edge_transform_and_lower_to_qnn,
    )

    soc_id, dsp_arch = soc_facts(args.soc)
    chip = getattr(QcomChipset, args.soc)
    model = build_model(args)
    quantized, sample = quantize(model, chip, args.format, args.context, before_convert=before_convert)
    import copy

    quantized_greedy = greedy(copy.deepcopy(quantized), encode(PROMPT), 8)  # before lowering consumes it
    t_quant = time.monotonic() - started
    spec = generate_qnn_executorch_compiler_spec(soc_model=chip,
                                                 backend_options=generate_htp_compiler_spec(use_fp16=False))
    methods = {"get_max_seq_len": args.context, "get_max_context_len": args.context, "get_vocab_size": VOCAB,
               "use_kv_cache": True, "enable_dynamic_shape": False, "get_bos_id": BOS, "get_eos_ids": [EOS]}
    edge = to_edge_transform_and_lower_to_qnn(quantized, sample, spec, constant_methods=methods,
                                              generate_etrecord=args.etrecord)
    graph = edge.exported_program().graph_module.graph
    delegated = sum(1 for n in graph.nodes if n.op == "call_function" and "call_delegate" in str(n.target))
    program = edge.to_executorch()
    (args.out / "model.pte").write_bytes(program.buffer)
    if args.etrecord:
        program.get_etrecord().save(str(args.out / "model.etrecord"))
    write_tokenizer(args.out / "tokenizer.json")
    (args.out / "export_args.json").write_text(json.dumps(
        {"soc": args.soc, "soc_id": soc_id, "dsp_arch": dsp_arch, "format": args.format}, indent=1))
    reference = write_reference(build_model(args), args.out, reference_prompts(args), args.reference_new_tokens)
    build = {"soc": args.soc, "format": args.format, "delegate_calls": delegated, "prompt": PROMPT,
             "eager_greedy": greedy(build_model(args), encode(PROMPT), 8),
             "quantized_greedy": quantized_greedy, "constant_methods": methods, "mlp": args.mlp,
             "widen_layer": args.widen_layer, "reference": reference,
             "t_quantize_s": round(t_quant, 2), "t_total_s": round(time.monotonic() - started, 2),
             "executorch": importlib.metadata.version("executorch")}
    (args.out / "build.json").write_text(json.dumps(build, indent=1))
    print("lower_decoder: wrote", args.out / "model.pte", json.dumps(build))
    return 0


if __name__ == "__main__":
    sys.exit(main())
