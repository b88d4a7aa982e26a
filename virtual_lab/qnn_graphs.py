"""The child that builds the virtual lab's QNN context binaries with the host's QNN: graphs with
the names and tensor dims an export's NPU stub declares, compiled by QAIRT's HTP backend for one
SoC through ExecuTorch's QnnManager binding (PyQnnManagerAdaptor), so QNN's own readers and
loaders accept them. The graphs compute nothing the virtual lab uses (the simulated NPU decides
the tokens): each output is a reshaped input of the same size or a broadcast of one element of
the inputs, and every input feeds the first output (QNN drops an input no op reads).

Two entry points, each run in a child with the QNN environment (harness.qnn.host.HostQnn.child_env):
`--option SOC OUT` writes the QnnManager option flatbuffer for a SoC (ExecuTorch's compile-spec
helpers import torch, ~10 s, so it runs once per SoC and toolchain and is cached); `--jobs FILE`
builds the binaries a JSON job file lists (torch never imported: ~0.5 s to start, 0.05-2 s a
binary). Op choice measured: a Tile to a [1,128,151936] output did not finish in 100 s, a
broadcast ElementWiseAdd with a [1,1,151936] static operand takes ~1.7 s.
"""

from __future__ import annotations

import argparse
import json
import math
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_ET_HEAD = struct.Struct("<IqQ")  # ExecuTorch's QNN context protocol: magic, signature, size (harness.qnn.pte)
_ET_MAGIC = 0x5678ABCD
_ET_ALIGN = 256  # ExecuTorch 1.5 places the context binary at the next 256-byte boundary
_QPARAMS = {"scale": 1 / 255, "offset": 0}


def write_option(soc: str, out: Path) -> None:
    """The option flatbuffer QnnManager takes, for an 8-bit HTP context on `soc` (QcomChipset name)."""
    from executorch.backends.qualcomm.partition.utils import generate_qnn_executorch_option
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec,
        generate_qnn_executorch_compiler_spec,
    )

    spec = generate_qnn_executorch_compiler_spec(soc_model=getattr(QcomChipset, soc),
                                                 backend_options=generate_htp_compiler_spec(use_fp16=False))
    out.write_bytes(generate_qnn_executorch_option(spec))


class _Graph:
    """One QNN graph's tensors and ops, named under the graph's own name."""

    def __init__(self, q: Any, name: str) -> None:
        self.q, self.name, self.count = q, name, 0
        self.ops: list[Any] = []

    def tensor(self, name: str, kind: Any, dims: Sequence[int], data: Any = None) -> Any:
        import numpy as np

        q = self.q
        return q.TensorWrapper(name, kind, q.Qnn_DataType_t.QNN_DATATYPE_UFIXED_POINT_8,
                               q.Qnn_QuantizationEncoding_t.QNN_QUANTIZATION_ENCODING_SCALE_OFFSET, dict(_QPARAMS),
                               len(dims), list(dims), [0] * len(dims), np.array([]) if data is None else data,
                               data is not None)

    def native(self, dims: Sequence[int]) -> Any:
        self.count += 1
        return self.tensor(f"{self.name}_vlab{self.count}", self.q.Qnn_TensorType_t.QNN_TENSOR_TYPE_NATIVE, dims)

    def static_zeros(self, dims: Sequence[int]) -> Any:
        import numpy as np

        self.count += 1
        return self.tensor(f"{self.name}_vlab{self.count}", self.q.Qnn_TensorType_t.QNN_TENSOR_TYPE_STATIC, dims,
                           np.zeros(math.prod(dims), dtype=np.uint8))

    def op(self, kind: str, ins: list[Any], outs: list[Any]) -> Any:
        self.count += 1
        o = self.q.PyQnnOpWrapper(f"{self.name}_op{self.count}", "qti.aisw", kind)
        o.AddInputTensors(ins)
        o.AddOutputTensors(outs)
        self.ops.append(o)
        return o

    def one_element(self, src: Any, rank: int) -> Any:
        """src[0, 0, ...] as a [1]-tensor."""
        import numpy as np

        one = self.native([1] * rank)
        o = self.op("StridedSlice", [src], [one])
        o.AddTensorParam("ranges", self.q.Qnn_DataType_t.QNN_DATATYPE_INT_32, 2, [rank, 3],
                         np.array([[0, 1, 1]] * rank, dtype=np.int32), True)
        flat = self.native([1])
        self.op("Reshape", [one], [flat])
        return flat

    def reshape(self, src: Any, dims: Sequence[int], out: Any = None) -> Any:
        out = out if out is not None else self.native(dims)
        self.op("Reshape", [src], [out])
        return out

    def add(self, a: Any, b: Any, dims: Sequence[int], out: Any = None) -> Any:
        out = out if out is not None else self.native(dims)
        self.op("ElementWiseAdd", [a, b], [out])
        return out


def build_graph(q: Any, name: str, inputs: Sequence[tuple[str, list[int]]],
                outputs: Sequence[tuple[str, list[int]]]) -> list[Any]:
    """The op wrappers of one graph (module doc): outputs of an input's size are that input
    reshaped, the others one element broadcast through two zero operands; one element of every
    input is added to the first output."""
    g = _Graph(q, name)
    kinds = q.Qnn_TensorType_t
    tins = {n: g.tensor(n, kinds.QNN_TENSOR_TYPE_APP_WRITE, d) for n, d in inputs}
    dims = dict(inputs)
    sources: list[str | None] = []
    for _n, d in outputs:
        same = [i for i, _ in inputs if math.prod(dims[i]) == math.prod(d) and i not in sources]
        sources.append(same[0] if same else None)
    bias = None
    for n, _d in inputs:  # every input first, in order: QNN lists a graph's inputs as ops first read them
        one = g.one_element(tins[n], len(dims[n]))
        bias = one if bias is None else g.add(bias, one, [1])
    for k, ((n, d), src) in enumerate(zip(outputs, sources)):
        out = g.tensor(n, kinds.QNN_TENSOR_TYPE_APP_READ, d)
        ones = g.reshape(bias, [1] * len(d))
        if src is not None:
            if k == 0:
                g.add(g.reshape(tins[src], d), ones, d, out)
            else:
                g.reshape(tins[src], d, out)
            continue
        head = [*d[:-1], 1]  # broadcast in two steps: statics of prod(d[:-1]) + d[-1] bytes, not prod(d)
        part = g.add(ones, g.static_zeros(head), head)
        g.add(part, g.static_zeros([1] * (len(d) - 1) + [d[-1]]), d, out)
    return [o.GetOpWrapper() for o in g.ops]


def raw_context(wrapped: bytes) -> bytes:
    """The QNN context binary inside ExecuTorch's QNN context protocol (what QnnManager.Compile
    returns): the bytes QNN's contextCreateFromBinary takes."""
    magic, _sig, size = _ET_HEAD.unpack_from(wrapped)
    if magic != _ET_MAGIC:
        raise ValueError(f"QnnManager.Compile returned no QNN context protocol (magic {magic:#x})")
    start = _ET_ALIGN if _ET_ALIGN + size <= len(wrapped) else _ET_HEAD.size  # older releases: no padding
    if start + size > len(wrapped):
        raise ValueError(f"QnnManager.Compile returned {len(wrapped)} bytes for a {size}-byte context binary")
    return wrapped[start:start + size]


def build_jobs(jobs: dict[str, Any]) -> None:
    """Each job's binary, written to its `out` path: {"option": PATH, "binaries": [{"out": PATH,
    "graphs": [{"name", "inputs": [[name, dims]], "outputs": [[name, dims]]}]}]}."""
    import executorch.backends.qualcomm.python.PyQnnManagerAdaptor as q

    manager = q.QnnManager(Path(jobs["option"]).read_bytes())
    if manager.InitBackend().value != 0:
        raise SystemExit("QnnManager.InitBackend failed: the QAIRT libraries on LD_LIBRARY_PATH did not load")
    try:
        for job in jobs["binaries"]:
            names = [g["name"] for g in job["graphs"]]
            manager.InitContext(names)
            ops = [build_graph(q, g["name"], [(n, list(d)) for n, d in g["inputs"]],
                               [(n, list(d)) for n, d in g["outputs"]]) for g in job["graphs"]]
            wrapped = bytes(manager.Compile(names, ops))
            manager.DestroyContext()
            if not wrapped:
                raise SystemExit(f"QNN compiled no context binary for graphs {names}")
            Path(job["out"]).write_bytes(raw_context(wrapped))
    finally:
        manager.Destroy()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m virtual_lab.qnn_graphs")
    ap.add_argument("--option", nargs=2, action="append", default=[], metavar=("SOC", "OUT"),
                    help="write the QnnManager option for SOC")
    ap.add_argument("--jobs", type=Path, help="build the binaries this JSON job file lists")
    args = ap.parse_args(argv)
    for soc, out in args.option:
        write_option(soc, Path(out))
    if args.jobs:
        build_jobs(json.loads(args.jobs.read_text(encoding="utf-8")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
