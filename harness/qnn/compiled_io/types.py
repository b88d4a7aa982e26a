"""The compiled IO's types: a graph's IO, a context binary, a stub's IO, the compiled target, and
the whole (CompiledIO), with the names of the sources they come from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.qnn.ctx import BinaryInfo

SOURCE_STUB = "stub"
SOURCE_QNNLIB = "libQnnSystem"  # the host's QAIRT library, in-process (harness.qnn.ctx)
SOURCE_SDK = "qnn-context-binary-utility"
SOURCE_SIDECAR = "sidecar"
SOURCE_UNKNOWN = "unknown"

Dims = tuple[int, ...]


@dataclass(frozen=True)
class GraphIO:
    """One compiled shape of one context binary (a QNN graph)."""

    name: str  # "graphllm0" (prefill), "graphllm1_0" (decode)
    index: int  # position in allGraphName: the shape index the plugin matches inputs against
    inputs: Mapping[str, Dims | None]  # tensor name -> compiled dims (None: rank not readable)
    outputs: Mapping[str, Dims]


@dataclass(frozen=True)
class ContextBinary:
    path: str  # as the stub names it, relative to the config's npu_model_dir ("qnn/graphllm0.bin")
    graphs: tuple[GraphIO, ...]
    source: str  # where the graph IO came from
    soc_id: int | None = None  # from the binary itself (libQnnSystem or the SDK dump) only
    dsp_arch: str | None = None
    qairt_build: str | None = None  # the QAIRT that compiled it (libQnnSystem only)
    detail: BinaryInfo | None = field(default=None, compare=False)  # everything libQnnSystem said


@dataclass(frozen=True)
class StubIO:
    """The compiled IO of one NPU stub (qnn/llm.mnn or qnn/visual.mnn)."""

    path: str  # relative to the export root
    source: str
    declared: dict[str, Dims]  # the stub's Input ops: name -> dims as declared (-1 = dynamic)
    outputs: tuple[str, ...]  # the stub's output names
    binaries: tuple[ContextBinary, ...]
    # makeIOJson's layout, one entry per compiled shape: {"inputs": [{"name", "shape"}], "outputs"}
    configs: tuple[dict[str, Any], ...]
    problems: tuple[str, ...] = ()  # what could not be read (never silently dropped)


@dataclass(frozen=True)
class CompiledTarget:
    soc_id: int | None
    dsp_arch: str | None
    source: str  # SOURCE_QNNLIB, SOURCE_SDK, SOURCE_SIDECAR or SOURCE_UNKNOWN


@dataclass(frozen=True)
class CompiledIO:
    root: Path
    stubs: dict[str, StubIO]  # "llm" / "visual" -> what was read
    target: CompiledTarget
    sidecar: dict[str, object] | None = None
    problems: tuple[str, ...] = ()
    unread: dict[str, str] = field(default_factory=dict)  # kind -> why nothing was read
    # Binaries read without a stub: "<name>.pte" -> an ExecuTorch program's QnnBackend delegates;
    # "qnn/graph<kind>*.bin" -> an MNN export's binaries whose stub was not read
    direct: dict[str, StubIO] = field(default_factory=dict)
    reader: str = ""  # the libQnnSystem.so that read the binaries, or why none did

    @property
    def source(self) -> str:
        """The sources the IO came from, best first ("stub", "sidecar", ... or "none")."""
        seen = list(dict.fromkeys(s.source for s in (*self.stubs.values(), *self.direct.values())))
        return "+".join(seen) or "none"

    def to_json(self) -> dict[str, object]:
        return {
            "root": str(self.root), "source": self.source,
            "target": {"soc_id": self.target.soc_id, "dsp_arch": self.target.dsp_arch,
                       "source": self.target.source},
            "reader": self.reader,
            "stubs": {kind: _stub_json(s) for kind, s in self.stubs.items()},
            "direct": {rel: _stub_json(s) for rel, s in self.direct.items()},
            "problems": list(self.problems) + [p for s in self.stubs.values() for p in s.problems],
        }


def _stub_json(s: StubIO) -> dict[str, object]:
    return {
        "path": s.path, "source": s.source,
        "declared_inputs": {k: list(v) for k, v in s.declared.items()},
        "outputs": list(s.outputs),
        "configs": list(s.configs),
        "binaries": [_binary_json(b) for b in s.binaries],
    }


def _binary_json(b: ContextBinary) -> dict[str, object]:
    out: dict[str, object] = {
        "path": b.path, "source": b.source, "soc_id": b.soc_id, "dsp_arch": b.dsp_arch, "qairt_build": b.qairt_build,
        "graphs": [{"name": g.name, "index": g.index,
                    "inputs": {k: (list(v) if v is not None else None) for k, v in g.inputs.items()},
                    "outputs": {k: list(v) for k, v in g.outputs.items()}} for g in b.graphs]}
    if b.detail is not None:
        out["binary"] = b.detail.to_json()  # QNN's own view: tensor names, datatypes, encodings
    return out
