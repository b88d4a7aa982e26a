"""Where a QNN cell's work ran (harness.qnn.placement, docs/placement.md): the program's delegates
and the ops outside them, the allowance the suite or plan expected on the CPU, the ops beyond it,
and, where an ETDump exists, each side's share of the time."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Self

from harness.evidence.base import Cell, Column, JsonObject, Row, Tone, json_object

NPU_BACKEND = "QnnBackend"  # ExecuTorch's QNN delegate id
MNN_QNN_PLUGIN = "QNN"  # the type of an MNN stub's Plugin op that runs a QNN context binary
NPU_DELEGATES = frozenset({NPU_BACKEND, MNN_QNN_PLUGIN})


def counted(calls: Mapping[str, int]) -> str:
    """`a x1, b x2`, by name: how placements, allowances and their excess are written."""
    return ", ".join(f"{name} x{n}" for name, n in sorted(calls.items()))


@dataclass(frozen=True)
class MethodPlacement:
    """One execution plan: its delegate calls by backend, and the ops it runs outside them."""

    method: str
    delegates: tuple[tuple[str, int], ...]  # (backend id, calls), by backend id
    cpu_ops: tuple[tuple[str, int], ...]  # (op "ns::name.overload", calls), model compute on the CPU
    bookkeeping: tuple[tuple[str, int], ...]  # executorch_prim ops: sizes and views, not compute


@dataclass(frozen=True)
class Placement:
    """A program's placement over all its methods."""

    methods: tuple[MethodPlacement, ...]

    def delegate_calls(self) -> dict[str, int]:
        return dict(_total(m.delegates for m in self.methods))

    def cpu_ops(self) -> dict[str, int]:
        return dict(_total(m.cpu_ops for m in self.methods))

    @property
    def on_npu(self) -> bool:
        return bool(NPU_DELEGATES & set(self.delegate_calls()))

    def unexpected(self, expected: Mapping[str, int]) -> dict[str, int]:
        """CPU op calls beyond `expected` (an op's full name, or its name without the overload, to
        the calls allowed): {op: calls over the allowance}."""
        over = {}
        for op, n in self.cpu_ops().items():
            allowed = expected.get(op, expected.get(op.rsplit(".", 1)[0], 0))
            if n > allowed:
                over[op] = n - allowed
        return over

    def describe(self) -> str:
        """One line: `QnnBackend x1; on the CPU: aten::_to_copy.out x1` (or `nothing on the CPU`)."""
        delegates = counted(self.delegate_calls()) or "no delegate"
        cpu = counted(self.cpu_ops())
        return f"{delegates}; " + (f"on the CPU: {cpu}" if cpu else "nothing on the CPU")

    def to_json(self) -> dict[str, object]:
        return {m.method: {"delegates": dict(m.delegates), "cpu_ops": dict(m.cpu_ops),
                           "bookkeeping": dict(m.bookkeeping)} for m in self.methods}

    @classmethod
    def of_json(cls, raw: Mapping[str, object]) -> Placement:
        methods = []
        for name, body in raw.items():
            if not isinstance(body, dict):
                raise ValueError(f"placement of {name!r} is not an object")
            methods.append(MethodPlacement(name, *(count_pairs(body.get(k) or {}) for k in
                                                   ("delegates", "cpu_ops", "bookkeeping"))))
        return cls(tuple(methods))


def _total(groups: Iterable[tuple[tuple[str, int], ...]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for group in groups:
        for name, n in group:
            out[name] += n
    return out


def parse_expected_cpu_ops(raw: object) -> dict[str, int]:
    """A user's CPU ops expected outside the delegate: a mapping {op: calls allowed} (a plan's
    `expected_cpu_ops`), or `op=N,op` text (pytest's `--expect-cpu-ops`; an op alone: once).
    An op is `namespace::name[.overload]` (ExecuTorch) or an MNN op type (`Attention`).
    ValueError says what is wrong (the caller names the key or option)."""
    if isinstance(raw, str):
        pairs: list[tuple[object, object]] = []
        for item in (p.strip() for p in raw.split(",")):
            if not item:
                continue
            name, eq, count = item.partition("=")
            pairs.append((name.strip(), (int(count) if count.strip().isdigit() else count.strip()) if eq else 1))
    elif isinstance(raw, dict):
        pairs = list(raw.items())
    else:
        raise ValueError(f"is a {type(raw).__name__}, not a mapping of op to calls allowed")
    out: dict[str, int] = {}
    for op, n in pairs:
        if not isinstance(op, str) or not op or any(c.isspace() for c in op):
            raise ValueError(f"names the op {op!r}: write an op as `ns::name.overload` or an MNN op type")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"allows {op} {n!r} calls: give a whole number, 0 or more")
        out[op] = n
    return out


def with_expected(base: Mapping[str, int], extra: Mapping[str, int] | None) -> dict[str, int]:
    """A suite's allowance of CPU ops with a user's (a plan's `expected_cpu_ops`, pytest's
    `--expect-cpu-ops`) on top: the user's count wins for an op both name."""
    return {**base, **(extra or {})}


def count_pairs(counts: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((str(k), int(v)) for k, v in counts.items()))



def _counts(raw: object) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {str(k): int(v) for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}


@dataclass(frozen=True)
class Placed:
    """The page's "where it ran": the placement the checks read, in words ("" for what was not read)."""

    placement: str  # "model.pte: QnnBackend x1; nothing on the CPU"
    share: str = ""  # "delegated 97.0% of op time (ETDump)"
    fallback: str = ""  # why it is `cpu-fallback` ("on the CPU beyond those expected: aten::relu.out x1")
    runtime: str = ""  # llm_demo's own word: "llm_demo: 32 QNN plugin inits"


@dataclass(frozen=True)
class PlacementEvidence:
    KEY: ClassVar[str] = "placement"
    COLUMNS: ClassVar[tuple[Column, ...]] = ()

    program: str  # the .pte's file name, or the MNN config's graphs ("qnn/llm.mnn")
    placement: Placement
    expected: dict[str, int] = field(default_factory=dict)  # CPU ops allowed (op -> calls)
    unexpected: dict[str, int] = field(default_factory=dict)  # CPU op calls beyond the allowance
    time_share: dict[str, float] | None = None  # ETDump: {"delegated": s, "cpu": s}, shares of op time
    runtime_qnn_inits: int | None = None  # llm_demo: QNN Plugin kernels its output says it created

    @property
    def summary(self) -> str:
        return self.placement.describe()

    def junit(self) -> dict[str, str | None]:
        props: dict[str, str | None] = {"placement": self.summary, "placement_unexpected_cpu_ops": counted(self.unexpected)}
        if self.time_share:
            props["placement_time_share"] = ", ".join(f"{k} {v:.3f}" for k, v in sorted(self.time_share.items()))
        if self.runtime_qnn_inits is not None:  # llm_demo's own word on its QNN plugin kernels
            props["placement_runtime_qnn_inits"] = str(self.runtime_qnn_inits)
        return props

    def rows(self) -> tuple[Row, ...]:
        return ()  # the cell's placement and cpu-fallback lines: its view

    def views(self) -> tuple[object, ...]:
        delegated = (self.time_share or {}).get("delegated")
        share = f"delegated {delegated * 100:.1f}% of op time (ETDump)" if delegated is not None else ""
        beyond = counted(self.unexpected)
        fallback = ("no QNN delegate: everything ran on the CPU" if not self.placement.on_npu
                    else f"on the CPU beyond those expected: {beyond}" if beyond else "")
        runtime = f"llm_demo: {self.runtime_qnn_inits} QNN plugin inits" if self.runtime_qnn_inits is not None else ""
        return (Placed(f"{self.program}: {self.summary}", share, fallback, runtime),)

    def columns(self) -> dict[str, Cell]:
        return {}

    def to_json(self) -> JsonObject:
        out: JsonObject = {"program": self.program, "summary": self.summary, "methods": self.placement.to_json(),
                           "expected": dict(self.expected), "unexpected": dict(self.unexpected)}
        if self.time_share is not None:
            out["time_share"] = dict(self.time_share)
        if self.runtime_qnn_inits is not None:
            out["runtime_qnn_inits"] = self.runtime_qnn_inits
        return out

    @classmethod
    def of_json(cls, raw: object) -> Self:
        raw = json_object(raw, "a placement")
        methods = raw.get("methods")
        if not isinstance(methods, dict):
            raise ValueError("a placement without its methods")
        share, inits = raw.get("time_share"), raw.get("runtime_qnn_inits")
        return cls(str(raw.get("program", "")), Placement.of_json(methods), _counts(raw.get("expected")),
                   _counts(raw.get("unexpected")),
                   {str(k): float(v) for k, v in share.items()} if isinstance(share, dict) else None,
                   inits if isinstance(inits, int) and not isinstance(inits, bool) else None)


@dataclass(frozen=True)
class PlacementUnread:
    """Why a QNN cell's placement was not read (the optional `mnn` extra is missing, ...): the cell
    keeps its verdict and the reports say what was not checked. Its JSON is the reason's text."""

    KEY: ClassVar[str] = "placement_unread"
    COLUMNS: ClassVar[tuple[Column, ...]] = ()

    why: str

    def junit(self) -> dict[str, str | None]:
        return {"placement_unread": self.why}

    def rows(self) -> tuple[Row, ...]:
        return (Row("placement not read", self.why, Tone.WARN),)

    def views(self) -> tuple[object, ...]:
        return ()

    def columns(self) -> dict[str, Cell]:
        return {}

    def to_json(self) -> str:
        return self.why

    @classmethod
    def of_json(cls, raw: object) -> Self:
        if not isinstance(raw, str):
            raise TypeError("placement_unread is its reason's text")
        return cls(raw)
