"""What MNN itself said about placement (harness/qnn/mnn_npu_log.py, docs/placement.md#mnns-own-words):
the ops its QNN backend left to the CPU at run time (`MNN_QNN: Not registered type %d, %s.`,
`Don't support type`), the sub-modules compilefornpu kept on the CPU at convert time (`error = ...,
max = ... for <path>`, `Failed to compile: <path>`), with each one's reason, and compilefornpu's
NPU/CPU speed per compiled module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from harness.evidence.base import Cell, Column, JsonObject, Row, Tone, fmt3, json_number, json_object


@dataclass(frozen=True)
class CpuFallback:
    stage: str  # "run" (llm_demo's output) or "convert" (compilefornpu's log)
    what: str  # the op's name (`/layers.0/mlp/Mul`), else `type N`; or the sub-module's path (`qnn/graphllm3`)
    reason: str
    line: str  # MNN's line as printed
    signature: str  # the catalogue entry (harness/catalogue/lines.yaml)

    def to_json(self) -> JsonObject:
        return {"stage": self.stage, "what": self.what, "reason": self.reason, "line": self.line,
                "signature": self.signature}


@dataclass(frozen=True)
class ModuleSpeed:
    module: str  # `qnn/graphllm0`
    npu_ms: float
    cpu_ms: float

    def to_json(self) -> JsonObject:
        return {"module": self.module, "npu_ms": self.npu_ms, "cpu_ms": self.cpu_ms}


@dataclass(frozen=True)
class MnnNpuLog:
    KEY: ClassVar[str] = "mnn_npu_log"
    COLUMNS: ClassVar[tuple[Column, ...]] = ()

    fallbacks: tuple[CpuFallback, ...]
    speeds: tuple[ModuleSpeed, ...] = ()
    total_npu_ms: float | None = None
    total_cpu_ms: float | None = None
    convert_log: str = ""  # the compilefornpu log read ("" none found)

    def describe_fallbacks(self) -> str:
        """`qnn/graphllm3 (convert: ...); /layers.0/Mul (run: ...)`: each one and its reason."""
        return "; ".join(f"{f.what} ({f.stage}: {f.reason})" for f in self.fallbacks)

    def junit(self) -> dict[str, str | None]:
        return {"mnn_cpu_fallbacks": self.describe_fallbacks() or None,
                "mnn_npu_ms": fmt3(self.total_npu_ms), "mnn_cpu_ms": fmt3(self.total_cpu_ms)}

    def rows(self) -> tuple[Row, ...]:
        return (Row("MNN kept on the CPU", self.describe_fallbacks(), Tone.WARN),) if self.fallbacks else ()

    def views(self) -> tuple[object, ...]:
        return ()

    def columns(self) -> dict[str, Cell]:
        return {}

    def to_json(self) -> JsonObject:
        return {"fallbacks": [f.to_json() for f in self.fallbacks], "speeds": [s.to_json() for s in self.speeds],
                "total_npu_ms": self.total_npu_ms, "total_cpu_ms": self.total_cpu_ms, "convert_log": self.convert_log}

    @classmethod
    def of_json(cls, raw: object) -> Self:
        raw = json_object(raw, "MNN's placement lines")
        falls = [json_object(f, "a CPU fallback") for f in raw.get("fallbacks") or []]
        speeds = [json_object(s, "a module's speed") for s in raw.get("speeds") or []]
        return cls(tuple(CpuFallback(str(f.get("stage") or ""), str(f.get("what") or ""), str(f.get("reason") or ""),
                                     str(f.get("line") or ""), str(f.get("signature") or "")) for f in falls),
                   tuple(ModuleSpeed(str(s.get("module") or ""), float(s.get("npu_ms") or 0.0),
                                     float(s.get("cpu_ms") or 0.0)) for s in speeds),
                   json_number(raw.get("total_npu_ms")), json_number(raw.get("total_cpu_ms")),
                   str(raw.get("convert_log") or ""))
