"""An ExecuTorch QNN export folder for the virtual lab: `kv_llama_qnn.pte`, `tokenizer.json` and
`export_manifest.json` (model_type, soc_id, dsp_arch), as the ExecuTorch suite takes one format.

The program is real where the host can build it (virtual_lab.qnn_cache): a tiny 8a8w model lowered
by ExecuTorch's QNN backend for the SoC of `soc_id`, once per machine and cached, so the harness
reads its placement, its context binary's socModel and QAIRT build, and QNN loads it. Its tokens
still come from the virtual runner's `virtual_behaviour.json` (the NPU stays simulated). Without
the `qnn` extra (or with `program="stand-in"`) it is a stand-in: an ExecuTorch header, no plan.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

from virtual_lab.exports.binaries import soc_name
from virtual_lab.qnn_build import ProgramSpec
from virtual_lab.qnn_cache import LAB_SOCS, find_builder

PROGRAM = "kv_llama_qnn.pte"


def stand_in_program(body: bytes) -> bytes:
    """A header-only program: root table offset 8 and the identifier ET12 (docs/host-qnn.md), no plan."""
    return struct.pack("<I", 8) + b"ET12" + (body or b"\0")


def real_program(soc_id: int, skip_ops: tuple[str, ...] = ()) -> Path | None:
    """The cached real program for the SoC of `soc_id` (lowered when missing), or None where the
    host cannot build one. A fully delegated one is lowered for the lab's SoCs at once: one child,
    one torch import (~10-15 s) for all of them."""
    builder, _why = find_builder()
    if builder is None:
        return None
    mine = ProgramSpec(soc_name(soc_id), tuple(skip_ops))
    specs = [mine] if skip_ops else [mine, *(ProgramSpec(s) for s in LAB_SOCS if s != mine.soc)]
    return builder.programs(specs)[mine]


def make_executorch_export(dst: Path, *, soc_id: int = 69, model_type: str = "qwen3", program: str = "auto",
                           skip_ops: tuple[str, ...] = ()) -> Path:
    """Write the export into `dst` (created; its files replaced). program: "auto" (real where the
    host can build it), "real" (an error where it cannot) or "stand-in"; skip_ops: aten targets
    the lowering leaves to the CPU (a partially delegated program)."""
    if program not in ("auto", "real", "stand-in"):
        raise ValueError(f"program must be 'auto', 'real' or 'stand-in', got {program!r}")
    from harness import soc

    info = soc.lookup_id(soc_id)
    arch = info.htp_arch if info is not None else None
    dst = Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    built = real_program(soc_id, skip_ops) if program != "stand-in" else None
    if built is not None:
        tmp = dst / f".{PROGRAM}.tmp"
        shutil.copyfile(built, tmp)
        tmp.replace(dst / PROGRAM)
    elif program == "real":
        _builder, why = find_builder()
        raise ValueError(f"program='real': this host cannot lower a QNN program ({why})")
    else:
        (dst / PROGRAM).write_bytes(stand_in_program(b"QnnBackend virtual program " + model_type.encode()))
    (dst / "tokenizer.json").write_text("{}", encoding="utf-8")
    manifest = {"model_type": model_type, "soc_id": soc_id, "dsp_arch": arch}
    (dst / "export_manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return dst / PROGRAM
