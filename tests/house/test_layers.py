"""The house's floors, guarded: `harness` never imports `virtual_lab`, a lower layer never
imports a higher one, no two modules import each other in a circle (in `harness` and in
`virtual_lab`), and no file in either is over 500 lines.

Floors (lowest first), as docs/ARCHITECTURE.md draws them; a room is a package or a loose module
at the top of `harness`, and a package is one room whatever it holds (its sub-packages too):
    errors, outcomes, findings -> hostfiles/soc/validation/pairs/verdict/lazy -> export, mnn_graph
    -> qnn -> inventory, checks, report, hostrt -> transport -> provision -> runners -> pipeline -> suite
    -> lab -> plugin -> cli (and the old `python -m` entry compiled_io)
Imports inside a room (harness.lab.* -> harness.lab.*) are free; imports under
`if TYPE_CHECKING:` count too: a type that must come from above is a sign the code sits low.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"
VIRTUAL_LAB = REPO / "virtual_lab"
assert HARNESS.is_dir(), HARNESS
assert VIRTUAL_LAB.is_dir(), VIRTUAL_LAB

# The floors of `harness`, lowest first; a module may import only rooms on lower floors (or its own room).
FLOORS: tuple[tuple[str, ...], ...] = (
    ("errors", "outcomes", "findings"),
    ("hostfiles", "soc", "validation", "pairs", "verdict", "lazy", "evidence", "catalogue"),
    ("export", "mnn_graph"),
    ("qnn",),
    ("inventory", "checks", "report", "hostrt"),
    ("etllama",),  # a GGUF as ExecuTorch's llama checkpoint, and its float reference (checks' format)
    ("transport",),
    ("provision",),
    ("runners",),
    ("pipeline",),
    ("suite",),
    ("lab",),
    ("replay",),  # a failed cell's bundle and its replay, one cell run again through the lab's door
    ("bisect",),  # bisection: runs cells (replay) over versions; its night hook is wired by cli
    ("plugin",),
    ("cli", "compiled_io"),
    ("__main__",),  # `python -m harness`: the console script's entry
)
LAYERS: dict[str, int] = {"harness": 1} | {f"harness.{room}": n for n, rooms in enumerate(FLOORS) for room in rooms}
# Arrows up, known and temporary (none now); the test fails once one is gone: delete it here.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module a file names in an import statement (top level, in functions, under TYPE_CHECKING)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else _module_name(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against the file's package
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.add(name)
            # `from harness import soc` names the module harness.soc
            found.update(f"{name}.{alias.name}" for alias in node.names)
    return found


def _room(module: str) -> str | None:
    parts = module.split(".")
    for n in (2, 1):
        key = ".".join(parts[:n])
        if key in LAYERS:
            return key
    return None


def _graph(root: Path = HARNESS) -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for target in _imports(path):
            if target in modules and target != name:
                graph[name].add(target)
    for name in modules:
        graph.setdefault(name, set())
    return graph


def test_every_room_has_a_layer() -> None:
    unknown = sorted(m for m in _graph() if _room(m) is None)
    assert not unknown, f"modules outside the layer table (add them to LAYERS and docs/ARCHITECTURE.md): {unknown}"


def test_harness_never_imports_virtual_lab() -> None:
    offenders = sorted(
        f"{_module_name(p)} imports {t}"
        for p in HARNESS.rglob("*.py") for t in _imports(p) if t == "virtual_lab" or t.startswith("virtual_lab.")
    )
    assert not offenders, offenders


def test_no_import_runs_up_a_floor() -> None:
    upward = []
    for source, targets in _graph().items():
        src_room = _room(source)
        for target in targets:
            dst_room = _room(target)
            if src_room is None or dst_room is None or src_room == dst_room or dst_room == "harness":
                continue
            if LAYERS[dst_room] >= LAYERS[src_room] and (source, target) not in KNOWN_UPWARD:
                upward.append(f"{source} (layer {LAYERS[src_room]}) imports {target} (layer {LAYERS[dst_room]})")
    assert not upward, "imports that run up or across a floor:\n" + "\n".join(sorted(upward))
    graph = _graph()
    stale = sorted(f"{s} -> {t}" for s, t in KNOWN_UPWARD if t not in graph.get(s, set()))
    assert not stale, f"KNOWN_UPWARD names arrows that are gone (delete them): {stale}"


@pytest.mark.parametrize("root", [HARNESS, VIRTUAL_LAB], ids=lambda p: p.name)
def test_no_circles(root: Path) -> None:
    graph = _graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not circles, f"modules that import each other in a circle: {circles}"


@pytest.mark.parametrize("root", [HARNESS, VIRTUAL_LAB], ids=lambda p: p.name)
@pytest.mark.parametrize("limit", [500])
def test_no_room_over_the_line_limit(limit: int, root: Path) -> None:
    big = sorted(
        (len(p.read_text(encoding="utf-8").splitlines()), str(p.relative_to(REPO)))
        for p in root.rglob("*.py")
    )
    over = [f"{name}: {n} lines" for n, name in big if n > limit]
    assert not over, f"files in {root.name}/ over {limit} lines (one job per file): {over}"
