"""Backend pairs: which backend runs the visual encoder and which runs the LLM.

The one home of the idea (docs/ARCHITECTURE.md "Backend pairs"). A pair is written visual/llm,
as users say it: "qnn/cpu" = visual on QNN, LLM on CPU. A text-only model has the LLM backend
alone: "qnn", "cpu". That string is the pair's name in records, JUnit and `--backends`; every
decision about a pair (is it QNN, which side, is it the CPU reference, which config file, which
order) is made here, on the parsed `BackendPair`.

A runtime config's pair comes from its content (`BackendPair.of_config`): a model path under a
`qnn/` folder is an NPU stub run by the QNN plugin (docs/mnn-export-layout.md); the config file
names below are only what the exporter names them (`config_name`).

A pair equals its name and hashes as it, as a `harness.outcomes` member equals its string:
records, JUnit and SQLite hold the name, a dict keyed by pairs is looked up by what a user
typed, and a record read back compares equal to the pair that wrote it.

An ExecuTorch export runs one backend with its own quantization format or CPU delegate:
"qnn:16a4w", "cpu:xnnpack" (`variant`); it has no visual side and no MNN config.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from harness.errors import HarnessError


class Backend(str, enum.Enum):
    CPU = "cpu"
    QNN = "qnn"


class PairError(HarnessError, ValueError):
    """A backend pair string that is not one (e.g. a typo in --backends)."""


def path_on_qnn(model_path: str) -> bool:
    """A config's model path runs on the QNN plugin when it sits under a `qnn/` folder
    (`qnn/llm.mnn`, the NPU stub `compilefornpu` writes)."""
    return "qnn" in PurePosixPath(model_path).parts[:-1]


@dataclass(frozen=True, eq=False)
class BackendPair:
    llm: Backend
    visual: Backend | None = None  # None: a text-only model (no visual side)
    variant: str = ""  # an ExecuTorch export's quant format or CPU delegate ("16a4w", "xnnpack")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BackendPair):
            return self.name == other.name
        return isinstance(other, str) and self.name == other

    def __hash__(self) -> int:
        return hash(self.name)

    # ---- parsing ----------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str | BackendPair) -> BackendPair:
        """"qnn/cpu" (visual/llm), "qnn" (text model) or "qnn:16a4w" (an ExecuTorch export's
        backend and format). Case and spaces are ignored."""
        if isinstance(text, BackendPair):
            return text
        head, colon, variant = str(text).partition(":")
        if colon:
            try:
                backend = Backend(head.strip().lower())
            except ValueError:
                backend = None
            if backend is not None and variant.strip():
                return cls(backend, variant=variant.strip())
        parts = [p.strip().lower() for p in str(text).split("/")]
        try:
            backends = [Backend(p) for p in parts]
        except ValueError:
            backends = []
        if len(backends) == 1:
            return cls(backends[0])
        if len(backends) == 2:
            return cls(llm=backends[1], visual=backends[0])
        raise PairError(f"backend pair {text!r} is not one of {', '.join(ALL_NAMES)} "
                        "(visual/llm for visual models, the LLM backend alone for text models); fix --backends")

    @classmethod
    def try_parse(cls, text: str | BackendPair) -> BackendPair | None:
        try:
            return cls.parse(text)
        except PairError:
            return None

    @classmethod
    def of_config(cls, config: Mapping[str, object], *, visual: bool) -> BackendPair:
        """The pair a runtime config runs, from its content (llm_model, visual_model)."""
        llm = Backend.QNN if path_on_qnn(str(config.get("llm_model", "llm.mnn"))) else Backend.CPU
        if not visual:
            return cls(llm)
        vis = Backend.QNN if path_on_qnn(str(config.get("visual_model", "visual.mnn"))) else Backend.CPU
        return cls(llm, vis)

    @classmethod
    def all(cls, *, visual: bool) -> tuple[BackendPair, ...]:
        """Every pair of a model, in the exporter's order (QNN first, the CPU reference last)."""
        return tuple(cls.parse(name) for name in (VL_CONFIGS if visual else TEXT_CONFIGS))

    @classmethod
    def cpu_reference(cls, *, visual: bool) -> BackendPair:
        return cls(Backend.CPU, Backend.CPU if visual else None)

    # ---- questions --------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The user-facing name ("qnn/cpu", "qnn")."""
        if self.variant:
            return f"{self.llm.value}:{self.variant}"
        return self.llm.value if self.visual is None else f"{self.visual.value}/{self.llm.value}"

    def __str__(self) -> str:
        return self.name

    @property
    def is_visual(self) -> bool:
        return self.visual is not None

    @property
    def uses_qnn_llm(self) -> bool:
        return self.llm is Backend.QNN

    @property
    def uses_qnn_visual(self) -> bool:
        return self.visual is Backend.QNN

    @property
    def is_qnn(self) -> bool:
        """Something of this pair runs on QNN/HTP (needs an HTP device and the QNN libraries)."""
        return self.uses_qnn_llm or self.uses_qnn_visual

    @property
    def is_cpu_reference(self) -> bool:
        """The all-CPU pair: the answer every other pair is compared with."""
        return not self.is_qnn

    @property
    def config_name(self) -> str:
        """The config file the exporter writes for this pair (an MNN pair's; PairError for
        an ExecuTorch variant, which has its .pte instead)."""
        if self.variant:
            raise PairError(f"backend {self.name} is an ExecuTorch variant: it has a .pte, no MNN config")
        return (VL_CONFIGS if self.is_visual else TEXT_CONFIGS)[self.name]

    @property
    def visual_llm(self) -> str:
        """Always "visual/llm", a text model's visual side as "cpu" (the virtual lab's keys)."""
        return f"{(self.visual or Backend.CPU).value}/{self.llm.value}"


# What the exporter names each pair's config (docs/mnn-export-layout.md). Order: the exporter's.
VL_CONFIGS: dict[str, str] = {
    "qnn/qnn": "config_qnn.json",
    "qnn/cpu": "config_cpu_llm_qnn_visual.json",
    "cpu/qnn": "config_qnn_cpu_visual.json",
    "cpu/cpu": "config.json",
}
TEXT_CONFIGS: dict[str, str] = {"qnn": "config_qnn.json", "cpu": "config.json"}
ALL_NAMES: tuple[str, ...] = (*VL_CONFIGS, *TEXT_CONFIGS)
CONFIG_NAMES: tuple[str, ...] = tuple(dict.fromkeys([*TEXT_CONFIGS.values(), *VL_CONFIGS.values()]))


def uses_qnn(pair: str | BackendPair) -> bool:
    """`BackendPair.parse(pair).is_qnn` for a pair name; a name that is no pair runs nothing on QNN."""
    parsed = pair if isinstance(pair, BackendPair) else BackendPair.try_parse(pair)
    return parsed is not None and parsed.is_qnn


def is_cpu_reference(pair: str | BackendPair) -> bool:
    parsed = pair if isinstance(pair, BackendPair) else BackendPair.try_parse(pair)
    return parsed is not None and parsed.is_cpu_reference


def cpu_first(pairs: Iterable[str | BackendPair]) -> list[BackendPair]:
    """The pairs with the CPU reference first (every other pair is compared with its answer),
    the rest in their given order. PairError for a name that is no pair."""
    return sorted((BackendPair.parse(p) for p in pairs), key=lambda p: not p.is_cpu_reference)


def reference_of(pairs: Iterable[str | BackendPair]) -> BackendPair | None:
    """The CPU reference among the pairs, or None."""
    return next((p for p in map(BackendPair.try_parse, pairs) if p is not None and p.is_cpu_reference), None)


__all__ = [
    "ALL_NAMES",
    "CONFIG_NAMES",
    "TEXT_CONFIGS",
    "VL_CONFIGS",
    "Backend",
    "BackendPair",
    "PairError",
    "cpu_first",
    "is_cpu_reference",
    "path_on_qnn",
    "reference_of",
    "uses_qnn",
]
