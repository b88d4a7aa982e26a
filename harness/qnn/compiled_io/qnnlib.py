"""The context binaries through the host's own QAIRT library, in-process (harness.qnn.ctx): each
binary's graphs and tensor dims, the socModel it was compiled for, its HTP arch (from the SoC
table) and the QAIRT build that compiled it. Preferred over the SDK tool and the sidecar when
the host's libraries are found (harness.qnn.host.auto_host_qnn); docs/host-qnn.md has the facts.

MNN exports: the binaries the stub's plugins name (qnn/graph<kind><N>.bin), their tensors mapped
to the stub's names by position (QNN names them t<K>). ExecuTorch exports: the QnnBackend
delegates inside each top-level .pte (harness.qnn.pte), named "<pte>#<method>[<index>]".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.errors import ArtifactError
from harness.qnn.compiled_io.binaries import binary_files
from harness.qnn.compiled_io.stub import _configs
from harness.qnn.compiled_io.types import SOURCE_QNNLIB, ContextBinary, Dims, GraphIO, StubIO
from harness.qnn.ctx import BinaryInfo, ContextBinaryError, QnnSystemLib
from harness.qnn.pte import qnn_delegates


def binary_from_info(info: BinaryInfo, path: str, stub_binary: ContextBinary | None,
                     problems: list[str]) -> ContextBinary:
    """QNN's view of one binary as the compiled IO's ContextBinary; with the stub's plugin, tensors
    get the stub's names by position and each graph its shape index."""
    stub_graphs = {g.name: g for g in stub_binary.graphs} if stub_binary else {}
    graphs = []
    for i, g in enumerate(info.graphs):
        ref = stub_graphs.get(g.name)
        if stub_binary is not None and ref is None:
            problems.append(f"{path}: graph {g.name!r} is not among the stub's allGraphName "
                            f"({', '.join(stub_graphs) or 'none'}); the stub and the binary come from different runs")
        ref_in = list(ref.inputs) if ref else []
        ref_out = list(ref.outputs) if ref else []
        for side, mine, theirs in (("inputs", g.inputs, ref_in), ("outputs", g.outputs, ref_out)):
            if ref is not None and len(mine) != len(theirs):
                problems.append(f"{path}: graph {g.name} has {len(mine)} {side} but the stub's plugin lists "
                                f"{len(theirs)}; the stub and the binary come from different runs")
        inputs: dict[str, Dims | None] = {(ref_in[k] if k < len(ref_in) else t.name): t.dims
                                          for k, t in enumerate(g.inputs)}
        outputs: dict[str, Dims] = {(ref_out[k] if k < len(ref_out) else t.name): t.dims
                                    for k, t in enumerate(g.outputs)}
        graphs.append(GraphIO(g.name, ref.index if ref else i, inputs, outputs))
    return ContextBinary(path, tuple(sorted(graphs, key=lambda x: x.index)), SOURCE_QNNLIB, info.soc_model,
                         info.htp_arch, info.qairt_build, info)


def with_qnnlib(root: Path, stub: StubIO, lib: QnnSystemLib, problems: list[str]) -> StubIO:
    """The stub's binaries re-read by QNN; one QNN refuses stays as the stub described it, with the
    refusal in `problems`."""
    bins: list[ContextBinary] = []
    local: list[str] = []
    for b in stub.binaries:
        p = root / b.path
        if not p.is_file():
            bins.append(b)
            continue
        try:
            bins.append(binary_from_info(lib.read_file(p, b.path), b.path, b, local))
        except ContextBinaryError as exc:
            local.append(str(exc))
            bins.append(b)
    problems.extend(local)
    if not bins or not all(b.source == SOURCE_QNNLIB for b in bins):
        return StubIO(stub.path, stub.source, stub.declared, stub.outputs, tuple(bins), stub.configs, stub.problems)
    shape_problems: list[str] = []
    configs = _configs(bins, stub.declared, stub.outputs, shape_problems, stub.path)
    problems.extend(shape_problems)
    return StubIO(stub.path, SOURCE_QNNLIB, stub.declared, stub.outputs, tuple(bins), configs, stub.problems)


def read_program(root: Path, rel: str, lib: QnnSystemLib, problems: list[str]) -> StubIO:
    """An ExecuTorch program's QnnBackend delegates, each binary read by QNN (PteError and
    ContextBinaryError name the file)."""
    path = root / rel
    bins = []
    for d in qnn_delegates(path):
        name = f"{rel}#{d.method}[{d.index}]"
        info = lib.read_file(path, name, d.offset, d.size)
        bins.append(binary_from_info(info, name, None, problems))
    return StubIO(rel, SOURCE_QNNLIB, {}, (), tuple(bins), ())


def _read_binaries(root: Path, kind: str, rels: list[str], lib: QnnSystemLib, problems: list[str]) -> StubIO:
    bins = []
    for rel in rels:
        try:
            bins.append(binary_from_info(lib.read_file(root / rel, rel), rel, None, problems))
        except ContextBinaryError as exc:
            problems.append(str(exc))
    return StubIO(f"qnn/graph{kind}*.bin", SOURCE_QNNLIB, {}, (), tuple(bins), ())


def read_direct(root: Path, lib: QnnSystemLib | None, stubs: Mapping[str, StubIO], problems: list[str],
                unread: dict[str, str], why_no_lib: str) -> dict[str, StubIO]:
    """The binaries no stub describes: every top-level .pte's QNN delegates, and an MNN export's
    qnn/graph<kind>*.bin of a kind whose stub was not read. Without the library they are listed in
    `unread`; what QNN refuses is a problem."""
    ptes = sorted(p.name for p in root.glob("*.pte") if p.is_file())
    loose = {k: v for k, v in binary_files(root).items() if v and k not in stubs}
    if not ptes and not loose:
        return {}
    if lib is None:
        named = ", ".join([*ptes, *(f"qnn/graph{k}*.bin" for k in loose)])
        unread["binaries"] = (f"{named}: reading the context binaries without a stub needs the host's QAIRT "
                              f"library ({why_no_lib}); pip install 'harness[qnn]'")
        return {}
    out = {}
    for rel in ptes:
        try:
            out[rel] = read_program(root, rel, lib, problems)
        except ArtifactError as exc:
            problems.append(str(exc))
    for kind, rels in loose.items():
        group = _read_binaries(root, kind, rels, lib, problems)
        out[group.path] = group
    return out
