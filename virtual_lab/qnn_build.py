"""Real QNN programs for the virtual lab and the tests, built once per machine by the host's QNN
(ExecuTorch's QNN lowering, QAIRT from the onnxruntime-qnn wheel) and cached.

A tiny two-linear model lowered for one SoC at 8a8w; `skip_ops` leaves ops of those aten targets
to the CPU (ExecuTorch's QnnPartitioner `skip_node_op_set`), which makes a real partially
delegated program. The lowering runs in a child with the QNN environment (importing torch and
ExecuTorch there, never in the caller); its .pte is written to a temp name and renamed, keyed
by (SoC, skipped ops, builder version) so a cached program is never rebuilt.

`python -m virtual_lab.qnn_build --soc SM8650 --out X.pte [--skip-op aten.linear.default]`
is the child; `build_program()` the caller's side.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_VERSION = "1"  # bump when the model or the lowering changes: old cache entries are not reused


class QnnBuildError(RuntimeError):
    """The host QNN could not build the program (its output's tail in the message)."""


@dataclass(frozen=True)
class ProgramSpec:
    soc: str  # QcomChipset name, e.g. "SM8650"
    skip_ops: tuple[str, ...] = ()  # aten targets left to the CPU, e.g. ("aten.linear.default",)

    def key(self) -> str:
        text = "|".join([_VERSION, self.soc, *sorted(self.skip_ops)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def file_name(self) -> str:
        part = "-partial" if self.skip_ops else ""
        return f"tiny-8a8w-{self.soc.lower()}{part}-{self.key()}.pte"


def build_program(spec: ProgramSpec, cache: Path, child_env: dict[str, str], timeout: float = 600.0) -> Path:
    """The cached program for `spec` in `cache`, lowered by a child with `child_env` when absent."""
    out = cache / spec.file_name()
    if out.is_file():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".{out.name}.{os.getpid()}.tmp"
    repo = str(Path(__file__).resolve().parents[1])
    env = dict(child_env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, env.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "virtual_lab.qnn_build", "--soc", spec.soc, "--out", str(tmp)]
    for op in spec.skip_ops:
        cmd += ["--skip-op", op]
    with tempfile.TemporaryDirectory(prefix="qnn-build-") as cwd:  # QNN drops files into its cwd
        try:
            proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            tmp.unlink(missing_ok=True)
            raise QnnBuildError(f"lowering {out.name} took over {timeout:.0f} s") from None
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        raise QnnBuildError(f"lowering {out.name} failed (exit {proc.returncode}): {proc.stdout[-1500:]}")
    tmp.replace(out)
    return out


def _lower(soc: str, skip_ops: Sequence[str], out: Path) -> None:
    import torch
    from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer, QuantDtype
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec,
        generate_qnn_executorch_compiler_spec,
        to_edge_transform_and_lower_to_qnn,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = torch.nn.Linear(32, 64)
            self.down = torch.nn.Linear(64, 32)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.down(torch.relu(self.up(x))) + x

    torch.manual_seed(0)
    model = Tiny().eval()
    sample = (torch.randn(1, 8, 32),)
    graph = torch.export.export(model, sample, strict=False).module()
    quantizer = QnnQuantizer(soc_model=getattr(QcomChipset, soc))
    quantizer.set_default_quant_config(QuantDtype.use_8a8w, is_linear_per_channel=True)
    prepared = prepare_pt2e(graph, quantizer)
    with torch.no_grad():
        for _ in range(4):
            prepared(torch.randn(1, 8, 32))
    converted = convert_pt2e(prepared)
    spec = generate_qnn_executorch_compiler_spec(
        soc_model=getattr(QcomChipset, soc), backend_options=generate_htp_compiler_spec(use_fp16=False))
    edge = to_edge_transform_and_lower_to_qnn(converted, sample, spec, skip_node_op_set=set(skip_ops))
    program = edge.to_executorch()
    out.write_bytes(program.buffer)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m virtual_lab.qnn_build")
    ap.add_argument("--soc", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--skip-op", action="append", default=[])
    args = ap.parse_args(argv)
    _lower(args.soc, args.skip_op, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
