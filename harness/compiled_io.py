"""The compiled QNN IO of an MNN export, read from the export's own artifacts.

One reader, a function of the export folder (`read_compiled_io(export_dir, qnn_sdk=None)`),
for the static shape guards (`harness.checks.shapes`) and provisioning's soc/arch guard.
Sources, best first (docs/qnn-export-artifacts.md describes each format):

- `stub`: the NPU stub `qnn/<name>.mnn` that MNN's `compilefornpu` writes. One `Plugin` op
  (type QNN) per context binary carries `path`, `allGraphName` (one graph per compiled shape:
  0 = prefill, 1 = decode; visual: one per image size), `allInputShape` (the dims of every
  input of every shape, concatenated), `inputs`/`outputs` and `o_<shape>_<k>` output dims;
  the stub's `Input` ops give the top-level names and ranks. Read through the `mnn` package's
  converter (the same call as harness.checks.quant), cached per (path, size, mtime).
- `qnn-context-binary-utility`: with a QNN SDK, the context binaries' own graphs and tensor
  dims, and the soc/arch they were built for where the dump says so.
- `sidecar`: the optional `qnn/export_manifest.json` an export step may leave
  (format in docs/qnn-export-artifacts.md, read by harness.export); the fallback for exports
  that have nothing else.

What no artifact says (soc_id, dsp_arch without the SDK or sidecar) is reported as unknown.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from collections.abc import Mapping
from typing import Any

from harness import soc
from harness.errors import ArtifactError
from harness.export import SIDECAR_PATH, ExportFileError, ExportFolder, FileProblem
from harness.mnn_graph import dump_mnn

SOURCE_STUB = "stub"
SOURCE_SDK = "qnn-context-binary-utility"
SOURCE_SIDECAR = "sidecar"
SOURCE_UNKNOWN = "unknown"
SDK_TOOL = "qnn-context-binary-utility"
_BIN_RE = re.compile(r"^graph(llm|visual)\d+\.bin$")

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
    soc_id: int | None = None  # from the SDK dump only
    dsp_arch: str | None = None


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
    source: str  # SOURCE_SDK, SOURCE_SIDECAR or SOURCE_UNKNOWN


@dataclass(frozen=True)
class CompiledIO:
    root: Path
    stubs: dict[str, StubIO]  # "llm" / "visual" -> what was read
    target: CompiledTarget
    sidecar: dict[str, Any] | None = None
    problems: tuple[str, ...] = ()
    unread: dict[str, str] = field(default_factory=dict)  # kind -> why nothing was read

    @property
    def source(self) -> str:
        """The sources the IO came from, best first ("stub", "sidecar", ... or "none")."""
        seen = list(dict.fromkeys(s.source for s in self.stubs.values()))
        return "+".join(seen) or "none"

    def to_json(self) -> dict[str, Any]:
        return {
            "root": str(self.root), "source": self.source,
            "target": {"soc_id": self.target.soc_id, "dsp_arch": self.target.dsp_arch,
                       "source": self.target.source},
            "stubs": {kind: _stub_json(s) for kind, s in self.stubs.items()},
            "problems": list(self.problems) + [p for s in self.stubs.values() for p in s.problems],
        }


def _stub_json(s: StubIO) -> dict[str, Any]:
    return {
        "path": s.path, "source": s.source,
        "declared_inputs": {k: list(v) for k, v in s.declared.items()},
        "outputs": list(s.outputs),
        "configs": list(s.configs),
        "binaries": [{"path": b.path, "source": b.source, "soc_id": b.soc_id, "dsp_arch": b.dsp_arch,
                      "graphs": [{"name": g.name, "index": g.index,
                                  "inputs": {k: (list(v) if v is not None else None) for k, v in g.inputs.items()},
                                  "outputs": {k: list(v) for k, v in g.outputs.items()}} for g in b.graphs]}
                     for b in s.binaries],
    }


# ---- the stub -----------------------------------------------------------------------------------

def _attrs(op: Mapping[str, Any]) -> dict[str, Any]:
    main = op.get("main")
    attrs = main.get("attr") if isinstance(main, dict) else None
    return {a["key"]: a for a in attrs or [] if isinstance(a, dict) and "key" in a}


def _ints(attr: Mapping[str, Any] | None) -> list[int]:
    return [int(x) for x in ((attr or {}).get("list") or {}).get("i") or []]


def _strs(attr: Mapping[str, Any] | None) -> list[str]:
    return [str(x) for x in ((attr or {}).get("list") or {}).get("s") or []]


def parse_stub(graph: Mapping[str, Any], rel: str) -> StubIO:
    """A stub's MNN graph dump (the mnn converter's JSON) -> its compiled IO."""
    names: list[str] = [str(n) for n in graph.get("tensorName") or []]
    ops = [op for op in graph.get("oplists") or [] if isinstance(op, dict)]
    problems: list[str] = []

    def name(i: int) -> str:
        return names[i] if 0 <= i < len(names) else f"#{i}"

    declared: dict[str, Dims] = {}
    rank: dict[int, int] = {}  # tensor index -> rank, where the stub says it
    for op in ops:
        if op.get("type") == "Input":
            dims = tuple(int(d) for d in (op.get("main") or {}).get("dims") or [])
            for i in op.get("outputIndexes") or []:
                declared[name(i)] = dims
                rank[i] = len(dims)
    plugins = [op for op in ops if op.get("type") == "Plugin" and (op.get("main") or {}).get("type") == "QNN"]
    for op in plugins:  # a plugin's outputs have the rank of their o_<0>_<k> dims
        a = _attrs(op)
        for k, i in enumerate(op.get("outputIndexes") or []):
            t = (a.get(f"o_0_{k}") or {}).get("tensor") or {}
            if "dims" in t:
                rank[i] = len(t["dims"])
    binaries: list[ContextBinary] = []
    for op in plugins:
        a = _attrs(op)
        path = str((a.get("path") or {}).get("s") or op.get("name") or "")
        graph_names = _strs(a.get("allGraphName"))
        flat = _ints(a.get("allInputShape"))
        ins = [int(i) for i in op.get("inputIndexes") or []]
        outs = [int(i) for i in op.get("outputIndexes") or []]
        if not graph_names:
            problems.append(f"{rel}: plugin {path or op.get('name')!r} has no allGraphName attribute")
            continue
        n = len(graph_names)
        ranks = _solve_ranks(ins, rank, len(flat), n)
        if ranks is None:
            problems.append(f"{rel}: plugin {path}: the ranks of its {len(ins)} inputs cannot be told "
                            f"from allInputShape ({len(flat)} ints, {n} graphs)")
        graphs = []
        for si, gname in enumerate(graph_names):
            g_in: dict[str, Dims | None] = {}
            if ranks is None:
                g_in = {name(i): None for i in ins}
            else:
                per = sum(ranks)
                cur = flat[si * per:(si + 1) * per]
                pos = 0
                for i, r in zip(ins, ranks):
                    g_in[name(i)] = tuple(cur[pos:pos + r])
                    pos += r
            g_out = {}
            for k, i in enumerate(outs):
                t = (a.get(f"o_{si}_{k}") or {}).get("tensor") or {}
                g_out[name(i)] = tuple(int(d) for d in t.get("dims") or [])
            graphs.append(GraphIO(gname, si, g_in, g_out))
        binaries.append(ContextBinary(path, tuple(graphs), SOURCE_STUB))
    outputs = tuple(str(o) for o in graph.get("outputName") or [])
    return StubIO(rel, SOURCE_STUB, declared, outputs, tuple(binaries),
                  _configs(binaries, declared, outputs, problems, rel), tuple(problems))


def _solve_ranks(ins: list[int], known: Mapping[int, int], total: int, n_graphs: int) -> list[int] | None:
    """Each input's rank. The plugin itself takes them from the runtime tensors; statically they
    come from the Input ops and the producing plugins' output dims, and one unknown rank is what
    is left of allInputShape's per-graph length."""
    if n_graphs <= 0 or total % n_graphs:
        return None
    per = total // n_graphs
    unknown = [k for k, i in enumerate(ins) if i not in known]
    ranks = [known.get(i, 0) for i in ins]
    rest = per - sum(ranks)
    if not unknown:
        return ranks if rest == 0 else None
    if len(unknown) == 1 and rest > 0:
        ranks[unknown[0]] = rest
        return ranks
    return None


def _configs(binaries: list[ContextBinary], declared: Mapping[str, Dims], outputs: tuple[str, ...],
             problems: list[str], rel: str) -> tuple[dict[str, Any], ...]:
    """Per compiled shape, the top-level inputs with the dims the plugins compiled them for."""
    n = max((len(b.graphs) for b in binaries), default=0)
    out = []
    for si in range(n):
        seen: dict[str, tuple[Dims, str]] = {}
        for b in binaries:
            if si >= len(b.graphs):
                continue
            for tname, dims in b.graphs[si].inputs.items():
                if tname not in declared or dims is None:
                    continue
                if tname in seen and seen[tname][0] != dims:
                    problems.append(f"{rel}: {tname} is compiled as {list(seen[tname][0])} in "
                                    f"{seen[tname][1]} but {list(dims)} in {b.path} (shape {si})")
                    continue
                seen.setdefault(tname, (dims, b.path))
        inputs = [{"name": k, "shape": list(seen[k][0])} for k in declared if k in seen]
        out.append({"inputs": inputs, "outputs": list(outputs)})
    return tuple(out)


@functools.lru_cache(maxsize=32)
def _dump_cached(path: str, size: int, mtime_ns: int) -> str:
    # The dump is ~0.5 s (a converter subprocess); suites read the same stub from several
    # tests, so it is kept per (path, size, mtime). Returned as text: callers cannot mutate it.
    graph = dump_mnn(Path(path))
    graph.pop("_harness_scale_precision", None)
    return json.dumps(graph)


def read_stub(path: Path, rel: str) -> StubIO:
    st = path.stat()
    graph = json.loads(_dump_cached(str(path.resolve()), st.st_size, st.st_mtime_ns))
    return parse_stub(graph, rel)


# ---- the context binaries through the QNN SDK ---------------------------------------------------

def sdk_tool(qnn_sdk: Path | str | None) -> Path | None:
    """`qnn-context-binary-utility` in a QNN SDK root (bin/x86_64-linux-clang first), if present."""
    if not qnn_sdk:
        return None
    root = Path(qnn_sdk).expanduser()
    candidates = [root / "bin" / "x86_64-linux-clang" / SDK_TOOL, *sorted(root.glob(f"bin/*/{SDK_TOOL}"))]
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def dump_context_binary(tool: Path, binary: Path) -> dict[str, Any]:
    """`qnn-context-binary-utility --context_binary B --json_file OUT` -> the JSON it writes."""
    with tempfile.TemporaryDirectory(prefix="qnn-ctx-") as tmp:
        out = Path(tmp) / "ctx.json"
        try:
            proc = subprocess.run([str(tool), "--context_binary", str(binary), "--json_file", str(out)],
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise ArtifactError(f"{binary}: {tool} took over 300 s; run it by hand to see why") from None
        try:
            data = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            detail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            raise ArtifactError(f"{binary}: {tool.name} could not read it ({detail[0]}); a context binary "
                                "from a newer QNN SDK than --qnn-sdk, or a truncated copy?") from None
    if not isinstance(data, dict):
        raise ArtifactError(f"{binary}: {tool.name} wrote no JSON object")
    return data


def _find_key(data: Any, keys: tuple[str, ...]) -> Any:
    """First value under any of `keys` (case-insensitive), searching the dump depth-first."""
    lowered = {k.lower() for k in keys}
    stack = [data]
    while stack:
        cur = stack.pop(0)
        if isinstance(cur, dict):
            for k, v in cur.items():
                if k.lower() in lowered and isinstance(v, (int, str)) and str(v).strip():
                    return v
            stack.extend(v for v in cur.values() if isinstance(v, (dict, list)))
        elif isinstance(cur, list):
            stack.extend(cur)
    return None


def parse_context_dump(data: Mapping[str, Any], path: str, stub_binary: ContextBinary | None) -> ContextBinary:
    """A qnn-context-binary-utility dump -> ContextBinary. QNN names MNN's graph tensors `t<K>`;
    the stub's plugin lists them in the same order as its inputs, so names are mapped by position."""
    raw_info = data.get("info")
    info: Mapping[str, Any] = raw_info if isinstance(raw_info, dict) else data
    graphs = []
    stub_graphs = {g.name: g for g in stub_binary.graphs} if stub_binary else {}
    for si, g in enumerate(info.get("graphs") or []):
        gi = g.get("info", g) if isinstance(g, dict) else {}
        gname = str(gi.get("graphName", f"graph{si}"))
        ref = stub_graphs.get(gname)
        ref_in = list(ref.inputs) if ref else []
        ref_out = list(ref.outputs) if ref else []

        def tensors(items: Any, ref_names: list[str]) -> dict[str, Dims]:
            out: dict[str, Dims] = {}
            for k, t in enumerate(items or []):
                ti = t.get("info", t) if isinstance(t, dict) else {}
                nm = ref_names[k] if k < len(ref_names) else str(ti.get("name", f"#{k}"))
                out[nm] = tuple(int(d) for d in ti.get("dimensions") or [])
            return out

        graphs.append(GraphIO(gname, ref.index if ref else si, tensors(gi.get("graphInputs"), ref_in),
                              tensors(gi.get("graphOutputs"), ref_out)))
    raw_soc = _find_key(data, ("socModel", "soc_model", "socId", "soc_id"))
    raw_arch = _find_key(data, ("dspArch", "dsp_arch", "htpArch", "htp_arch"))
    soc_id = int(raw_soc) if raw_soc is not None and str(raw_soc).strip().isdigit() else None
    arch = soc.normalize_arch(raw_arch) if raw_arch is not None else None
    return ContextBinary(path, tuple(sorted(graphs, key=lambda g: g.index)), SOURCE_SDK, soc_id, arch)


# ---- the folder -----------------------------------------------------------------------------

def _read_sidecar(export: ExportFolder, problems: list[str]) -> dict[str, Any] | None:
    """The sidecar through the export reader; an unusable one is a problem, not an error."""
    try:
        found = export.sidecar
    except ExportFileError as exc:
        rel = exc.path.relative_to(export.root).as_posix()
        problems.append(f"{rel}: must be a JSON object" if exc.problem is FileProblem.NOT_OBJECT
                        else f"{rel}: not readable JSON ({exc.detail}); fix or delete it")
        return None
    return found.data if found is not None else None


def _sidecar_stub(sidecar: Mapping[str, Any], kind: str) -> StubIO | None:
    io = (sidecar.get("io") or {}).get(kind) if isinstance(sidecar.get("io"), dict) else None
    configs = io.get("configs") if isinstance(io, dict) else None
    if not isinstance(configs, list) or not configs:
        return None
    graphs = sidecar.get("graphs", {}).get(kind, []) if isinstance(sidecar.get("graphs"), dict) else []
    bins = tuple(ContextBinary(str(g), (), SOURCE_SIDECAR) for g in graphs if isinstance(g, str))
    outs = tuple(str(o) for o in configs[0].get("outputs", [])) if isinstance(configs[0], dict) else ()
    return StubIO(SIDECAR_PATH, SOURCE_SIDECAR, {}, outs, bins, tuple(configs))


def stub_paths(root: Path) -> dict[str, str]:
    """kind ("llm", "visual") -> the stub's path relative to root, for the stubs present."""
    return {p.stem: p.relative_to(root).as_posix() for p in sorted((root / "qnn").glob("*.mnn"))
            if p.stem in ("llm", "visual") and p.is_file()}


def read_compiled_io(export: Path | str | ExportFolder, *, qnn_sdk: Path | str | None = None) -> CompiledIO:
    """Everything the export says about its compiled QNN IO and target (see the module doc).
    Raises ArtifactError only when the export is not a folder; what cannot be read is listed in
    `problems` / `unread`."""
    if not isinstance(export, ExportFolder):
        if not Path(export).is_dir():
            raise ArtifactError(f"export folder {export} does not exist or is not a directory")
        export = ExportFolder(Path(export))
    root = export.root
    problems: list[str] = []
    unread: dict[str, str] = {}
    sidecar = _read_sidecar(export, problems)
    tool = sdk_tool(qnn_sdk)
    if qnn_sdk and tool is None:
        problems.append(f"--qnn-sdk {qnn_sdk}: no bin/*/{SDK_TOOL} there; the context binaries were not read")
    stubs: dict[str, StubIO] = {}
    for kind, rel in stub_paths(root).items():
        try:
            stub = read_stub(root / rel, rel)
        except ArtifactError as exc:
            unread[kind] = str(exc)
            continue
        if not stub.binaries:
            unread[kind] = f"{rel}: no QNN Plugin op (not a compilefornpu stub)"
            continue
        if tool is not None:
            stub = _with_sdk(root, stub, tool, problems)
        stubs[kind] = stub
    if sidecar is not None:
        for kind in ("llm", "visual"):
            if kind not in stubs:
                fallback = _sidecar_stub(sidecar, kind)
                if fallback is not None:
                    stubs[kind] = fallback
    return CompiledIO(root, stubs, _target(stubs, sidecar, problems), sidecar, tuple(problems), unread)


def _with_sdk(root: Path, stub: StubIO, tool: Path, problems: list[str]) -> StubIO:
    def read(b: ContextBinary) -> ContextBinary | str:
        p = root / b.path
        if not p.is_file():
            return b
        try:
            return parse_context_dump(dump_context_binary(tool, p), b.path, b)
        except ArtifactError as exc:
            return str(exc)

    # One tool process per binary (30+ for an LLM): a few at a time, results in stub order.
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(read, stub.binaries))
    bins = []
    for b, r in zip(stub.binaries, results):
        if isinstance(r, str):
            problems.append(r)
            bins.append(b)
        else:
            bins.append(r)
    source = SOURCE_SDK if bins and all(b.source == SOURCE_SDK for b in bins) else stub.source
    configs = stub.configs
    if source == SOURCE_SDK:
        local: list[str] = []
        configs = _configs(bins, stub.declared, stub.outputs, local, stub.path)
        problems.extend(local)
    return StubIO(stub.path, source, stub.declared, stub.outputs, tuple(bins), configs, stub.problems)


def _target(stubs: Mapping[str, StubIO], sidecar: Mapping[str, Any] | None, problems: list[str]) -> CompiledTarget:
    read = [b for s in stubs.values() for b in s.binaries if b.source == SOURCE_SDK]
    socs = {b.soc_id for b in read if b.soc_id is not None}
    archs = {b.dsp_arch for b in read if b.dsp_arch is not None}
    if len(socs) > 1 or len(archs) > 1:
        problems.append(f"the context binaries disagree on their target: soc_id {sorted(socs)}, "
                        f"dsp_arch {sorted(archs)}; recompile them together")
    if socs or archs:
        return CompiledTarget(min(socs) if len(socs) == 1 else None,
                              min(archs) if len(archs) == 1 else None, SOURCE_SDK)
    if sidecar is not None and (sidecar.get("soc_id") is not None or sidecar.get("dsp_arch")):
        raw = sidecar.get("soc_id")
        soc_id = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
        arch = soc.normalize_arch(sidecar["dsp_arch"]) if sidecar.get("dsp_arch") else None
        return CompiledTarget(soc_id, arch or (str(sidecar.get("dsp_arch")) or None), SOURCE_SIDECAR)
    return CompiledTarget(None, None, SOURCE_UNKNOWN)


def read_binary_target(export_dir: Path | str, qnn_sdk: Path | str | None) -> tuple[CompiledTarget, str] | None:
    """soc_id / dsp_arch from the first context binary of each kind through the SDK tool, and the
    binary it was read from; None without a tool or binaries, or when the dump names neither."""
    root = Path(export_dir)
    tool = sdk_tool(qnn_sdk)
    if tool is None:
        return None
    found: list[tuple[ContextBinary, str]] = []
    for rels in binary_files(root).values():
        if rels:
            first = min(rels, key=lambda r: int(re.sub(r"\D", "", PurePosixPath(r).name) or 0))
            found.append((parse_context_dump(dump_context_binary(tool, root / first), first, None), first))
    socs = {b.soc_id for b, _ in found if b.soc_id is not None}
    archs = {b.dsp_arch for b, _ in found if b.dsp_arch is not None}
    if not socs and not archs:
        return None
    if len(socs) > 1 or len(archs) > 1:
        raise ArtifactError(f"{root}: the context binaries disagree on their target (soc_id {sorted(socs)}, "
                            f"dsp_arch {sorted(archs)}); recompile them together")
    return (CompiledTarget(min(socs) if socs else None, min(archs) if archs else None, SOURCE_SDK),
            ", ".join(rel for _, rel in found))


def binary_files(root: Path, npu_dir: Path | None = None) -> dict[str, list[str]]:
    """kind -> the graph<kind><N>.bin files in <npu_dir>/qnn, as "qnn/..." paths."""
    qdir = (npu_dir or root) / "qnn"
    out: dict[str, list[str]] = {"llm": [], "visual": []}
    if qdir.is_dir():
        for p in sorted(qdir.iterdir()):
            m = _BIN_RE.match(p.name)
            if m and p.is_file():
                out[m.group(1)].append(PurePosixPath("qnn", p.name).as_posix())
    return out


__all__ = [
    "CompiledIO", "CompiledTarget", "ContextBinary", "GraphIO", "StubIO", "SIDECAR_PATH", "SOURCE_SDK",
    "SOURCE_SIDECAR", "SOURCE_STUB", "SOURCE_UNKNOWN", "binary_files", "dump_context_binary",
    "parse_context_dump", "parse_stub", "read_binary_target", "read_compiled_io", "read_stub", "sdk_tool", "stub_paths",
]
