"""The virtual lab's QNN context binaries (`qnn/graph*.bin`) and its `qnn-context-binary-utility`.

Where the host's QNN built them (virtual_lab.exports.binaries) they are real context binaries,
read here by the host's libQnnSystem.so (harness.qnn.ctx). Elsewhere they are stand-ins: a
stand-in starts with b"QNNCTX\\0\\1", a little-endian u32 length and a JSON header {"graphs": [...],
"soc_id", "dsp_arch", "vtcm_mb", "graph_io"}, then filler. `read_context_header(path)` returns
that JSON. `binary_target(path)` reads either kind, so the virtual runtime can fail with
`QNN: Failed to validate binary` when soc/arch do not match the device; `write_sdk_tool(dir)`
writes a stand-in `qnn-context-binary-utility` that dumps either in the SDK tool's JSON layout
(`context_binary_utility_json`).
"""

from __future__ import annotations

import json
import os
import struct
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from virtual_lab.exports.spec import ExportSpec

if TYPE_CHECKING:
    from harness.qnn import BinaryInfo, TensorInfo

CONTEXT_MAGIC = b"QNNCTX\x00\x01"


def context_header(graphs: list[str], spec: ExportSpec, graph_io: dict | None = None) -> bytes:
    """The bytes a virtual context binary starts with (the filler follows)."""
    meta = json.dumps({"graphs": graphs, "soc_id": spec.soc_id, "dsp_arch": spec.dsp_arch,
                       "vtcm_mb": spec.vtcm_mb, "format": "virtual-lab qnn context",
                       "graph_io": graph_io or {}}).encode()
    return CONTEXT_MAGIC + struct.pack("<I", len(meta)) + meta


def read_context_header(path: Path | str) -> dict:
    """The JSON header of a virtual-lab `qnn/graph*.bin`; ValueError when it has none."""
    with open(path, "rb") as fh:
        head = fh.read(len(CONTEXT_MAGIC) + 4)
        if len(head) < len(CONTEXT_MAGIC) + 4 or not head.startswith(CONTEXT_MAGIC):
            raise ValueError(f"{path}: not a virtual-lab QNN context binary (bad magic)")
        (n,) = struct.unpack("<I", head[len(CONTEXT_MAGIC):])
        try:
            return json.loads(fh.read(n))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: corrupt context header ({exc})") from None


def is_stand_in(path: Path | str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(len(CONTEXT_MAGIC)) == CONTEXT_MAGIC


def _real(path: Path | str) -> BinaryInfo:
    """A real context binary as the host's QNN reads it; ValueError when QNN refuses it."""
    from harness.errors import HarnessError
    from harness.qnn import find_host_qnn, read_context_binary

    try:
        try:
            host = find_host_qnn()
        except (HarnessError, OSError):
            # A virtual device's sandbox: $HOME is read-only, so the wheel's library layout goes
            # to the sandbox's own /tmp (harness.qnn.host lays it out under a cache folder).
            scratch = Path("/tmp") if os.access("/tmp", os.W_OK) else Path(tempfile.gettempdir())
            host = find_host_qnn(cache_dir=scratch / "vlab-qnn-sdk")
        return read_context_binary(Path(path), host=host)
    except (HarnessError, OSError) as exc:  # ContextBinaryError, QnnUnavailable: both name the file or library
        raise ValueError(str(exc)) from None


def binary_target(path: Path | str) -> tuple[int | None, str | None]:
    """(soc_id, dsp_arch) a context binary was built for, stand-in or real; ValueError for a
    file that is neither (or a real one without the host's QNN to read it)."""
    if is_stand_in(path):
        head = read_context_header(path)
        return head.get("soc_id"), (str(head["dsp_arch"]) if head.get("dsp_arch") else None)
    info = _real(path)
    return info.soc_model, info.htp_arch


def context_binary_utility_json(path: Path) -> dict:
    """What `qnn-context-binary-utility --json_file` writes for a virtual-lab context binary:
    {"info": {"graphs": [{"info": {"graphName", "graphInputs": [{"info": {"name", "dimensions"}}],
    "graphOutputs": [...]}}], "socModel": N, "contextMetadata": {"info": {"dspArch": N}}}}, the
    layout of the real tool's dump (docs/qnn-export-artifacts.md).
    Raises ValueError for a file that is no context binary."""
    if not is_stand_in(path):
        return _utility_json_real(_real(path))
    head = read_context_header(path)
    graphs = []
    for g in head.get("graphs", []):
        io = head.get("graph_io", {}).get(g, {"inputs": [], "outputs": []})
        graphs.append({"info": {
            "graphName": g,
            "graphInputs": [{"info": {"name": f"t{k}", "dimensions": d}} for k, d in enumerate(io["inputs"])],
            "graphOutputs": [{"info": {"name": f"o{k}", "dimensions": d}} for k, d in enumerate(io["outputs"])],
        }})
    arch = str(head.get("dsp_arch", "")).lstrip("v")
    return {"info": {"graphs": graphs, "socModel": head.get("soc_id"), "numGraphs": len(graphs),
                     "contextMetadata": {"info": {"dspArch": int(arch) if arch.isdigit() else None}}}}


def _utility_json_real(info: BinaryInfo) -> dict:
    def tensors(ts: tuple[TensorInfo, ...]) -> list[dict]:
        return [{"info": {"name": t.name, "dimensions": list(t.dims)}} for t in ts]

    graphs = [{"info": {"graphName": g.name, "graphInputs": tensors(g.inputs), "graphOutputs": tensors(g.outputs)}}
              for g in info.graphs]
    arch = (info.htp_arch or "").lstrip("v")
    return {"info": {"graphs": graphs, "socModel": info.soc_model, "numGraphs": len(graphs),
                     "buildId": info.qairt_build,
                     "contextMetadata": {"info": {"dspArch": int(arch) if arch.isdigit() else None}}}}


def write_sdk_tool(bin_dir: Path) -> Path:
    """An executable `qnn-context-binary-utility` for the virtual lab's QNN SDK (bin_dir is
    <sdk>/bin/x86_64-linux-clang): it answers from a stand-in's header, or from what the host's
    libQnnSystem.so reads in a real binary."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    tool = bin_dir / "qnn-context-binary-utility"
    repo = Path(__file__).resolve().parents[2]
    tool.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"sys.path.insert(0, {str(repo)!r})\n"
        "from virtual_lab.exports.context import context_binary_utility_json\n"
        "args = dict(zip(sys.argv[1::2], sys.argv[2::2]))\n"
        "try:\n"
        "    data = context_binary_utility_json(args['--context_binary'])\n"
        "except (KeyError, OSError, ValueError) as exc:\n"
        "    print(f'Error: Failed to get context binary info. ({exc})', file=sys.stderr)\n"
        "    sys.exit(1)\n"
        "open(args['--json_file'], 'w').write(json.dumps(data))\n", encoding="utf-8")
    tool.chmod(0o755)
    return tool
