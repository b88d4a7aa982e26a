"""Real QNN programs for the virtual lab and the tests, built once per machine by the host's QNN
(ExecuTorch's QNN lowering, QAIRT from the onnxruntime-qnn wheel) and cached.

A tiny two-linear model lowered for one SoC at 8a8w; `skip_ops` leaves ops of those aten targets
to the CPU (ExecuTorch's QnnPartitioner `skip_node_op_set`), which makes a real partially
delegated program. The lowering runs in a child with the QNN environment (importing torch and
ExecuTorch there, never in the caller); its .pte is written to a temp name and renamed, keyed
by (SoC, skipped ops, builder version) so a cached program is never rebuilt.

`python -m virtual_lab.qnn_build --job 'SM8650|aten.relu.default|X.pte' ...` is the child;
`build_programs()` the caller's side.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
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
        part = "-cpu-" + "-".join(op.split(".")[1] for op in sorted(self.skip_ops)) if self.skip_ops else ""
        return f"tiny-8a8w-{self.soc.lower()}{part}-{self.key()}.pte"


def build_programs(specs: Sequence[ProgramSpec], cache: Path, child_env: Mapping[str, str],
                   timeout: float = 900.0) -> dict[ProgramSpec, Path]:
    """The cached program of each spec in `cache`; the missing ones lowered by one child with
    `child_env` (importing torch and ExecuTorch costs more than a tiny lowering)."""
    found = {spec: cache / spec.file_name() for spec in specs}
    missing = [spec for spec, path in found.items() if not path.is_file()]
    if not missing:
        return found
    cache.mkdir(parents=True, exist_ok=True)
    tmps = {spec: cache / f".{found[spec].name}.{os.getpid()}.tmp" for spec in missing}
    env = dict(child_env)
    repo = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, env.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "virtual_lab.qnn_build"]
    for spec in missing:
        cmd += ["--job", "|".join([spec.soc, ",".join(spec.skip_ops), str(tmps[spec])])]
    try:
        with tempfile.TemporaryDirectory(prefix="qnn-build-") as cwd:  # QNN drops files into its cwd
            proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=timeout, check=False)
        if proc.returncode != 0 or not all(t.is_file() for t in tmps.values()):
            raise QnnBuildError(f"lowering {', '.join(s.file_name() for s in missing)} failed "
                                f"(exit {proc.returncode}): {proc.stdout[-1500:]}")
        for spec, tmp in tmps.items():
            tmp.replace(found[spec])
    except subprocess.TimeoutExpired:
        raise QnnBuildError(f"lowering {len(missing)} programs took over {timeout:.0f} s") from None
    finally:
        for tmp in tmps.values():
            tmp.unlink(missing_ok=True)
    return found


def context_binaries_of(program: Path) -> list[Path]:
    """The QNN context binaries inside a built program, written once beside it (`<stem>.<i>.bin`,
    temp name then rename): real binaries QNN accepts, for the virtual lab's exports."""
    from harness.qnn import context_binaries

    out = []
    for i, (_, blob) in enumerate(context_binaries(program)):
        path = program.with_name(f"{program.stem}.{i}.bin")
        if not path.is_file() or path.stat().st_size != len(blob):
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(blob)
            tmp.replace(path)
        out.append(path)
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
    ap.add_argument("--job", action="append", required=True, help="SOC|skipped,ops|OUT.pte")
    args = ap.parse_args(argv)
    for job in args.job:
        soc, skipped, out = job.split("|", 2)
        _lower(soc, [op for op in skipped.split(",") if op], Path(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
