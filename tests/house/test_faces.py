"""Each name has one import path from outside its package (issue 35): a package's `__init__` is its
one face and imports only from its own package; no other module re-exports a name it imports; code
outside a package imports the face, never a module inside it. Loose modules at the top of `harness`
are faces of their own.

Production code (harness/, virtual_lab/, suites/, tools/) may not reach into a package at all;
tests and benchmarks may, to test or time one module's internals (a private helper, a module to
patch), but a name the face offers is imported from the face everywhere. A CLI's `main` is read
from its module anywhere (a face holds one `main` at most)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"
STRICT = ("harness", "virtual_lab", "suites", "tools")
WHITE_BOX = ("tests", "benchmarks")


def _name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_name(p): p for p in HARNESS.rglob("*.py")}
PACKAGES = {_name(p) for p in HARNESS.rglob("__init__.py")}


def _package_of(module: str) -> str:
    return module if module in PACKAGES else module.rsplit(".", 1)[0]


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    module: str  # imported module (resolved)
    names: tuple[str, ...]  # names taken from it; () for `import x.y`
    line: int


def _imports(path: Path) -> Iterator[Import]:
    source = _name(path)
    package = source if path.name == "__init__.py" else source.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(source, alias.name, (), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                module = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            plain = tuple(a.name for a in node.names if f"{module}.{a.name}" not in MODULES)
            for alias in node.names:  # `from pkg import mod` takes a module, not a name
                if f"{module}.{alias.name}" in MODULES:
                    yield Import(source, f"{module}.{alias.name}", (), node.lineno)
            if plain or not node.names:
                yield Import(source, module, plain, node.lineno)


def _inside(source: str, package: str) -> bool:
    return source == package or source.startswith(package + ".")


def _defined(path: Path) -> set[str]:
    """Names a module defines at its top (assignments, defs, classes, also under if/try)."""
    names: set[str] = set()
    body = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while body:
        node = body.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            body.extend(node.body)
            body.extend(getattr(node, "orelse", []))
            body.extend(getattr(node, "finalbody", []))
            for h in getattr(node, "handlers", []):
                body.extend(h.body)
    return names


def _files(roots: tuple[str, ...]) -> Iterator[Path]:
    for root in roots:
        yield from sorted((REPO / root).rglob("*.py"))


def _face_names(package: str) -> set[str]:
    import importlib

    return set(getattr(importlib.import_module(package), "__all__", ()))


def test_a_face_imports_only_from_its_own_package() -> None:
    bad = [f"{i.source}:{i.line} imports {i.module}"
           for p in HARNESS.rglob("__init__.py") for i in _imports(p)
           if i.module.startswith("harness") and i.module not in ("harness.lazy",)
           and not _inside(i.module, i.source)]
    assert not bad, "a package's __init__ names only its own modules' names:\n" + "\n".join(bad)


def test_no_module_re_exports_another_modules_names() -> None:
    """A name imported from module M is read from M, not from a module that imported it."""
    defined = {m: _defined(p) for m, p in MODULES.items() if p.name != "__init__.py"}
    bad = []
    for path in _files(STRICT + WHITE_BOX):
        for i in _imports(path):
            if i.module in defined:
                bad += [f"{i.source}:{i.line} takes {n} from {i.module}, which only imports it"
                        for n in i.names if n != "*" and n not in defined[i.module]]
    assert not bad, "\n".join(bad)


def test_outside_code_imports_a_package_from_its_face() -> None:
    bad = []
    for path in _files(STRICT + WHITE_BOX):
        strict = path.relative_to(REPO).parts[0] in STRICT
        for i in _imports(path):
            if i.module not in MODULES or i.module in PACKAGES:
                continue
            package = _package_of(i.module)
            if package == "harness" or _inside(i.source, package) or i.names == ("main",):
                continue  # a loose top-level module is its own face; inside a package all is free; a CLI's main
            if strict:
                bad.append(f"{i.source}:{i.line} reaches into {i.module}: import from {package}")
            else:
                offered = sorted(set(i.names) & _face_names(package))
                if offered:
                    bad.append(f"{i.source}:{i.line} takes {offered} from {i.module}: {package} offers them")
    assert not bad, f"{len(bad)} imports past a package's face:\n" + "\n".join(bad)


def test_a_lazy_face_offers_no_name_of_its_own_submodules() -> None:
    """Importing a submodule sets the package's attribute of that name to the module, over a lazy
    face's name (harness.checks.export_verdict, a function, became the module once imported)."""
    bad = []
    for init in HARNESS.rglob("__init__.py"):
        if "lazy_names(" not in init.read_text(encoding="utf-8"):
            continue
        package = _name(init)
        subs = {p.stem for p in init.parent.glob("*.py")} | {p.parent.name for p in init.parent.glob("*/__init__.py")}
        bad += [f"{package}.{n}" for n in sorted(_face_names(package) & subs)]
    assert not bad, f"face names that are also submodules (rename one): {bad}"
