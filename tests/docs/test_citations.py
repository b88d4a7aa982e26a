"""Facts the code relies on are cited from the repository's own docs/, never from material a
reader of the repository cannot open (the planners' ../shared/reference notes)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CODE_DIRS = ("harness", "virtual_lab", "suites", "tools", "benchmarks")
SUFFIXES = {".py", ".yaml", ".yml", ".toml", ".cfg", ".sh"}
# The reference notes outside the repository (their facts live in docs/ now).
UNREACHABLE = re.compile(r"mnn-llm\.md|executorch-qnn\.md|adb-ssh\.md|shared/reference")
DOC_LINK = re.compile(r"docs/([\w.-]+\.md)(?:#([\w-]+))?")


def _code_files() -> list[Path]:
    return sorted(
        p for d in CODE_DIRS if (REPO / d).is_dir()
        for p in (REPO / d).rglob("*") if p.suffix in SUFFIXES and "__pycache__" not in p.parts
    )


def _anchors(doc: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in doc.read_text(encoding="utf-8").splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def test_no_citation_of_unreachable_reference_notes() -> None:
    hits = [
        f"{p.relative_to(REPO)}:{n}: {line.strip()}"
        for p in _code_files()
        for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if UNREACHABLE.search(line)
    ]
    assert not hits, (
        "cite the fact from docs/ (write it there in the project's own words), not from "
        "../shared/reference:\n" + "\n".join(hits)
    )


def test_cited_docs_and_sections_exist() -> None:
    bad = []
    cited = 0
    for p in _code_files():
        for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for m in DOC_LINK.finditer(line):
                cited += 1
                doc = REPO / "docs" / m.group(1)
                if not doc.is_file():
                    bad.append(f"{p.relative_to(REPO)}:{n}: docs/{m.group(1)} does not exist")
                elif m.group(2) and m.group(2) not in _anchors(doc):
                    bad.append(f"{p.relative_to(REPO)}:{n}: docs/{m.group(1)} has no section "
                               f"#{m.group(2)} (headings: {sorted(_anchors(doc))})")
    assert cited > 0, "no docs/ citation found: the scan itself is broken"
    assert not bad, "\n".join(bad)


def test_links_between_docs_resolve() -> None:
    bad = []
    for doc in sorted((REPO / "docs").glob("*.md")):
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for m in DOC_LINK.finditer(line):
                target = REPO / "docs" / m.group(1)
                if not target.is_file():
                    bad.append(f"docs/{doc.name}:{n}: docs/{m.group(1)} does not exist")
                elif m.group(2) and m.group(2) not in _anchors(target):
                    bad.append(f"docs/{doc.name}:{n}: docs/{m.group(1)} has no section #{m.group(2)}")
            for m in re.finditer(r"\]\(#([\w-]+)\)", line):
                if m.group(1) not in _anchors(doc):
                    bad.append(f"docs/{doc.name}:{n}: no section #{m.group(1)} in this file")
    assert not bad, "\n".join(bad)
