"""The bytes of an export's `qnn/graph*.bin`: real context binaries built by the host's QNN
(virtual_lab.qnn_cache) whose graphs carry the names and dims the NPU stub's plugin declares,
for the SoC of the export's soc_id; or, where the host cannot build them (no `qnn` extra) or
the knob asks for it, the stand-ins of context.py.

Knob `qnn_binaries`: "auto" (real where the host can build them), "real" (an error where it
cannot) or "stand-in"."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from harness import soc
from virtual_lab.exports.spec import ExportSpec
from virtual_lab.exports.stub import PluginSpec, convert_script, plugins_of, stub_bytes
from virtual_lab.qnn_cache import BinarySpec, GraphSpec, find_builder

MODES = ("auto", "real", "stand-in")


def binary_spec(plugin: PluginSpec, soc_name: str) -> BinarySpec:
    """The context binary a plugin names: one graph per compiled shape, tensors t<K> / o<K> as
    QNN names them in a compilefornpu binary, in the plugin's order."""
    return BinarySpec(soc_name, tuple(
        GraphSpec(g, tuple((f"t{k}", tuple(d)) for k, d in enumerate(plugin.input_dims[si])),
                  tuple((f"o{k}", tuple(d)) for k, d in enumerate(plugin.output_dims[si])))
        for si, g in enumerate(plugin.graph_names)))


def soc_name(soc_id: int) -> str:
    """The SoC a soc_id names (harness.soc's table, QNN's socModel numbers)."""
    info = soc.lookup_id(soc_id)
    if info is None:
        raise ValueError(f"soc_id {soc_id}: no SoC with that QNN socModel number to build context binaries for; "
                         "pass a soc_id from harness.soc's table, or qnn_binaries='stand-in'")
    return info.model


def real_binaries(plugins: Sequence[PluginSpec], spec: ExportSpec) -> dict[str, bytes] | None:
    """Plugin path -> the real context binary's bytes; None where stand-ins are written."""
    mode = spec.qnn_binaries
    if mode == "stand-in":
        return None
    builder, why = find_builder()
    if builder is None:
        if mode == "real":
            raise ValueError(f"qnn_binaries='real': this host cannot build QNN context binaries ({why})")
        return None
    name = soc_name(spec.soc_id)
    specs = {p.path: binary_spec(p, name) for p in plugins}
    built = builder.context_binaries(list(specs.values()))
    return {path: built[s].read_bytes() for path, s in specs.items()}


def rebuild_binaries(root: Path, plugins: Sequence[PluginSpec]) -> None:
    """Rewrite the real context binaries `plugins` name under `root` (an export folder) for the
    SoC they were built for, after their stub changed; stand-ins and missing files are left alone."""
    from virtual_lab.exports.context import binary_target, is_stand_in

    present = [p for p in plugins if (root / p.path).is_file() and not is_stand_in(root / p.path)]
    if not present:
        return
    builder, why = find_builder()
    if builder is None:
        raise ValueError(f"{root}: its context binaries are real, and rebuilding them needs the host's QNN ({why})")
    specs = {p.path: binary_spec(p, soc_name(binary_target(root / p.path)[0] or 0)) for p in present}
    built = builder.context_binaries(list(specs.values()))  # one child for all of them
    for rel, spec in specs.items():
        tmp = root / f"{rel}.rebuild.tmp"
        tmp.write_bytes(built[spec].read_bytes())
        tmp.replace(root / rel)


def edit_stub(path: Path, edit: Callable[[dict], object]) -> None:
    """Dump an NPU stub to its JSON graph, let `edit` change it, and write it back in place
    (tests make the faulty stubs upstream writes this way). Where the export's context binaries
    are real, the binaries of the plugins the edit changed are rebuilt to match: one compile
    writes both, so a real export's stub and binaries never disagree."""
    with tempfile.TemporaryDirectory(prefix="vlab-stub-") as tmp:
        out = Path(tmp) / "stub.json"
        subprocess.run([sys.executable, "-c", convert_script(), "-f", "MNN", "--modelFile", str(path),
                        "--JsonFile", str(out)], capture_output=True, text=True, timeout=300)
        try:
            graph = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: the mnn converter could not dump it ({exc})") from None
    before = plugins_of(graph)
    edit(graph)
    Path(path).write_bytes(stub_bytes(json.dumps(graph, sort_keys=True)))
    changed = [p for p in plugins_of(graph) if p not in before]
    if changed:
        rebuild_binaries(Path(path).parent.parent, changed)
