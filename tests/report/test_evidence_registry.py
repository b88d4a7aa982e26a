"""The evidence registry stays complete (issue 43): every family module under harness/evidence/ is
listed in FAMILIES (or SPREAD), each says how every report shows it (JUnit properties, HTML rows,
history columns), no two families write one JUnit property, and the reporters (JUnit, history, the
page's core) name no family: they loop over a record's evidence."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
from dataclasses import fields
from pathlib import Path

from harness import evidence
from harness.evidence import (
    COLUMNS,
    FAMILIES,
    KINDS,
    SPREAD,
    Agreement,
    CacheUse,
    Column,
    CpuFallback,
    ExportBuild,
    FloatReferenceAgreement,
    Localization,
    LocalizeEvidence,
    MnnNpuLog,
    ModuleSpeed,
    OpCycle,
    OpCycles,
    OpGap,
    Outcome,
    PlacementUnread,
    ProgramSize,
    QuantFinding,
    Row,
)
from harness.report import TestRecord

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures" / "records"
# Every module of harness/report/ but records.py (the record itself: its bookkeeping is the LabRun family).
REPORTERS = tuple(sorted(p.name for p in (REPO / "harness" / "report").glob("*.py") if p.name != "records.py"))


def _declared() -> set[type]:
    """Every class with a `KEY` defined in a module of harness/evidence/."""
    found = set()
    for path in sorted((REPO / "harness" / "evidence").glob("*.py")):
        module = importlib.import_module(f"harness.evidence.{path.stem}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and "KEY" in vars(cls):
                found.add(cls)
    return found


def _samples() -> list[object]:
    """One of each family: the old nights' records (fixtures/records) and the families they lack."""
    out: list[object] = []
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            out += list(TestRecord.from_dict(json.loads(line)).evidence)
    gap = OpGap(3, "aten_mul_tensor_2", "aten.mul.Tensor", "layers.2", 4.2, 0.91, 0.2)
    out += [FloatReferenceAgreement("reference/index.json", Agreement.DRIFT, 0.033, 0.05, 0.1, 0.2, 0.01, 0.02,
                                    ("median mean KL 0.033 >= 0.018",)),
            LocalizeEvidence(Localization(Outcome.DEPARTED, 10.0, "16a8w", (gap,), gap), cell="test_quant_format_runs[16a8w]"),
            QuantFinding("mlp_mul_inherited", "t", 2, "range inherited"),
            PlacementUnread("the `mnn` extra is not installed"),
            ProgramSize("model.pte", 4096, 3900, 1),
            ExportBuild("k", CacheUse.HIT, "SM8650", "16a4w", 57, "v75", ("python", "x.py"), "/out", "/log", 103.0),
            OpCycles("model.pte", "cycles, emulator", 2, (OpCycle("aten_linear_default_7", 2.9e6, 20, "aten.linear.default",
                                                                  "layers.1.gate"),)),
            MnnNpuLog((CpuFallback("convert", "qnn/graphllm1", "compilefornpu kept it on the CPU", "error = ...",
                                   "mnn-npu-module-error"),), (ModuleSpeed("qnn/graphllm0", 1.5, 6.25),), 3.5, 11.75)]
    return out


def test_every_family_module_is_registered() -> None:
    assert _declared() == set(FAMILIES) | set(SPREAD), "list a new family in harness/evidence/__init__.py FAMILIES"
    assert set(KINDS.values()) == set(FAMILIES) | set(SPREAD)


def test_each_family_says_how_every_report_shows_it() -> None:
    samples = _samples()
    assert {type(s) for s in samples} == set(FAMILIES) | set(SPREAD), "a sample of each family (here)"
    names = {c.name for c in COLUMNS}
    owner: dict[str, type] = {}
    for s in samples:
        kind = type(s)
        assert all(isinstance(c, Column) and c.sql in ("REAL", "TEXT") for c in kind.COLUMNS), kind  # type: ignore[attr-defined]  # each sample is an Evidence
        props = s.junit()  # type: ignore[attr-defined]  # each sample is an Evidence
        assert all(isinstance(v, str | None) for v in props.values()), kind
        for prop in props:
            assert owner.setdefault(prop, kind) is kind, f"JUnit property {prop} written by {owner[prop]} and {kind}"
        assert all(isinstance(r, Row) for r in s.rows()), kind  # type: ignore[attr-defined]  # an Evidence
        assert set(s.columns()) <= {c.name for c in kind.COLUMNS} <= names, kind  # type: ignore[attr-defined]  # an Evidence


def _evidence_names(module: str) -> set[str]:
    tree = ast.parse((REPO / "harness" / "report" / module).read_text(encoding="utf-8"))
    return {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("harness.evidence") for a in node.names}


def test_the_reporters_name_no_family() -> None:
    """The reporters and the page's sections read a record's evidence through the registry: its
    JUnit properties, rows, history columns, and the views each section reads by type."""
    assert {"junit.py", "history.py", "html.py", "where_ran.py", "departs.py", "exports.py"} <= set(REPORTERS)
    families = {k.__name__ for k in (*FAMILIES, *SPREAD)}
    for name in REPORTERS:
        named = _evidence_names(name)
        assert not named & families, f"harness/report/{name} names {sorted(named & families)}: loop over rec.evidence"


def test_every_view_a_family_gives_has_a_section() -> None:
    read = {n for name in REPORTERS for n in _evidence_names(name)}
    given = {type(v).__name__ for s in _samples() for v in s.views()}  # type: ignore[attr-defined]  # an Evidence
    assert given and given <= read, f"views no section of harness/report/ reads: {sorted(given - read)}"


def test_a_failing_family_line_reads_first() -> None:
    """A drift's figures against their line and a departure's op are a failed cell's reasons."""
    rows = [r for s in _samples() for r in s.rows() if r.first]  # type: ignore[attr-defined]  # an Evidence
    texts = " | ".join(r.text for r in rows)
    assert "median mean KL 0.033 >= 0.018" in texts and "aten_mul_tensor_2" in texts, texts
    assert evidence.COLUMNS == COLUMNS


def test_each_family_reads_back_what_it_writes() -> None:
    """A family's JSON decodes to the same typed value (through JSON text, as a record's line)."""
    for s in _samples():
        kind = type(s)
        again = kind.of_json(json.loads(json.dumps(s.to_json(), sort_keys=True)))  # type: ignore[attr-defined]  # an Evidence
        assert again == s, kind
        assert again.to_json() == s.to_json(), kind  # type: ignore[attr-defined]  # an Evidence


# A family field that is still a free JSON bag, with its reason (none of those the page or history reads).
_BAGS = {("ExportBuild", "facts")}  # QNN's facts of a failed build: whatever QNN's log reader found


def test_no_family_keeps_a_raw_json_bag() -> None:
    """Every family is typed field by field: no dict of whatever was written, kept to write it back."""
    bags = {(kind.__name__, f.name) for kind in (*FAMILIES, *SPREAD) for f in fields(kind)  # type: ignore[arg-type]  # dataclasses
            if any(w in str(f.type) for w in ("JsonObject", "Any", "object"))}
    assert bags == _BAGS, f"type these fields (dataclasses, enum words): {sorted(bags - _BAGS)}"
