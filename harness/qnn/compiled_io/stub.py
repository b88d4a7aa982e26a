"""The NPU stub `qnn/<name>.mnn` that MNN's `compilefornpu` writes -> its compiled IO
(docs/qnn-export-artifacts.md): the QNN Plugin ops' graphs and input/output dims, read through
the `mnn` package's converter (harness.mnn_graph), cached per (path, size, mtime)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.mnn_graph import dump_mnn
from harness.qnn.compiled_io.types import SOURCE_STUB, ContextBinary, Dims, GraphIO, StubIO


def _attrs(op: Mapping[str, object]) -> dict[str, Any]:
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


def stub_paths(root: Path) -> dict[str, str]:
    """kind ("llm", "visual") -> the stub's path relative to root, for the stubs present."""
    return {p.stem: p.relative_to(root).as_posix() for p in sorted((root / "qnn").glob("*.mnn"))
            if p.stem in ("llm", "visual") and p.is_file()}
