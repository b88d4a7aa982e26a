"""Where an ExecuTorch program's work runs, read from the program itself (docs/placement.md).

Each execution plan's chains list its instructions (schema `program.fbs`): a DelegateCall runs
one of the plan's delegates (QnnBackend: the NPU), a KernelCall runs an operator on the CPU
(its `operators` entry names it, `aten::_to_copy` + overload `out`). Operators of the
`executorch_prim` namespace are the runtime's own bookkeeping on sizes and views, not model
compute, so they are counted apart. No ETDump and nothing from ExecuTorch is needed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.qnn.pte import QNN_BACKEND_ID, open_program

# Instruction.instr_args is a flatbuffer union: slot 0 its type, slot 1 the table.
_KERNEL_CALL, _DELEGATE_CALL = 1, 2
BOOKKEEPING_NAMESPACE = "executorch_prim::"


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
        return QNN_BACKEND_ID in self.delegate_calls()

    def unexpected(self, expected: Iterable[str]) -> dict[str, int]:
        """CPU ops not covered by `expected` (each an op's full name, or its name without the overload)."""
        allowed = set(expected)
        return {op: n for op, n in self.cpu_ops().items() if op not in allowed and op.rsplit(".", 1)[0] not in allowed}

    def describe(self) -> str:
        """One line: `QnnBackend x1; on the CPU: aten::_to_copy.out x1` (or `nothing on the CPU`)."""
        delegates = ", ".join(f"{b} x{n}" for b, n in sorted(self.delegate_calls().items())) or "no delegate"
        cpu = ", ".join(f"{op} x{n}" for op, n in sorted(self.cpu_ops().items()))
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
            methods.append(MethodPlacement(name, *(_pairs(body.get(k) or {}) for k in
                                                   ("delegates", "cpu_ops", "bookkeeping"))))
        return cls(tuple(methods))


def _total(groups: Iterable[tuple[tuple[str, int], ...]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for group in groups:
        for name, n in group:
            out[name] += n
    return out


def _pairs(counts: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((str(k), int(v)) for k, v in counts.items()))


def read_placement(path: Path) -> Placement:
    """The placement of the program at `path`. PteError (an ArtifactError) names the file."""
    flat, program = open_program(path)
    methods = []
    for plan in flat.vector(program, 1):  # Program.execution_plan
        ops = []
        for op in flat.vector(plan, 6):  # ExecutionPlan.operators: name, overload
            name, overload = flat.string(op, 0), flat.string(op, 1)
            ops.append(f"{name}.{overload}" if overload else name)
        backends = [flat.string(d, 0) for d in flat.vector(plan, 7)]  # ExecutionPlan.delegates: id
        delegates: Counter[str] = Counter()
        kernels: Counter[str] = Counter()
        for chain in flat.vector(plan, 5):  # ExecutionPlan.chains
            for instr in flat.vector(chain, 2):  # Chain.instructions
                kind = flat.scalar(instr, 0, "B")
                if kind not in (_KERNEL_CALL, _DELEGATE_CALL):
                    continue  # moves, jumps, frees: no work placed anywhere
                at = flat.field(instr, 1)
                index = flat.scalar(flat.ref(at), 0, "i") if at is not None else -1  # 0 is omitted (the default)
                table = ops if kind == _KERNEL_CALL else backends
                if not 0 <= index < len(table):
                    raise flat._bad(f"an instruction names entry {index} of {len(table)}")
                (kernels if kind == _KERNEL_CALL else delegates)[table[index]] += 1
        compute = {k: n for k, n in kernels.items() if not k.startswith(BOOKKEEPING_NAMESPACE)}
        prim = {k: n for k, n in kernels.items() if k.startswith(BOOKKEEPING_NAMESPACE)}
        methods.append(MethodPlacement(flat.string(plan, 0), _pairs(delegates), _pairs(compute), _pairs(prim)))
    return Placement(tuple(methods))


__all__ = ["BOOKKEEPING_NAMESPACE", "MethodPlacement", "Placement", "read_placement"]
