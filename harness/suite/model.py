"""What a suite is: one declarative list of checks, each with its scope, its needs and the
skip reasons those needs give. Both front doors read it: pytest parametrizes a test per check
(suites/support.py), the night's job iterates it (harness/lab/jobs.py); the testcase names
come from here, so the two doors name every testcase alike."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from harness.outcomes import FailureClass
from harness.pairs import BackendPair
from harness.report import TestRecord
from harness.runners import RunnerKind
from harness.verdict import Verdict


class Scope(enum.StrEnum):
    """Where a check runs, and so how often."""

    EXPORT = "export"  # once per export, before any device time (no device needed)
    CELL = "cell"  # per matrix cell: (backend pair, prompt)
    PAIR = "pair"  # per backend pair of the matrix (all its prompts' runs)
    DEVICE = "device"  # once per device and export
    FORMAT = "format"  # per quant format of the suite (Suite.formats): the ExecuTorch matrix
    # once per device and export, after the others, from their records (the export's verdict)
    SUMMARY = "summary"


class Need(enum.StrEnum):
    """What a check needs beyond its scope's inputs; an unmet need skips it with the reason."""

    PAIR_RUNS = "pair-runs"  # the backend pair ran in this session or night
    IMAGE = "image"  # a visual export (image prompts)
    INSTRUMENTED_RUNTIME = "instrumented-runtime"  # a runtime printing [POSDBG] dumps (docs/posdbg.md)
    CPU_CONFIG = "cpu-config"  # the export has the CPU reference config
    ACTIVATION_QUANT = "activation-quant"  # the export's LLM graph carries activation ranges
    MNN_CONVERTER = "mnn-converter"  # the `mnn` package's converter, to read llm.mnn (harness/mnn_graph.py)


@dataclass(frozen=True)
class Instance:
    """One testcase of a check: the pair and prompt it covers (None where its scope has none)."""

    pair: BackendPair | None = None
    case_id: str | None = None
    quant: str | None = None  # a quant format (Scope.FORMAT)

    @property
    def id(self) -> str:
        """pytest's parametrize id: "qnn/qnn-cat", "qnn/qnn", "16a4w", "" for an unparametrized check."""
        return "-".join(p for p in (self.pair.name if self.pair else None, self.case_id, self.quant) if p)


In = TypeVar("In")  # what a check reads: its scope's input (suite/checks.py, suite/et_checks.py)


@dataclass(frozen=True)
class CheckCall(Generic[In]):
    """One call of a check: its input, the record to fill with its evidence, the testcase it
    decides, and the failure classes other selected checks report on their own."""

    inp: In
    rec: TestRecord
    instance: Instance
    deferred: frozenset[FailureClass] = frozenset()


@dataclass(frozen=True)
class Check(Generic[In]):
    """One check of a suite: `run` reads the input of type `reads` (its signature says which) and
    returns the Verdict; run_check hands it nothing else."""

    name: str
    scope: Scope
    reads: type[In] = field(compare=False, repr=False)
    run: Callable[[CheckCall[In]], Verdict] = field(compare=False, repr=False)
    needs: tuple[Need, ...] = ()
    # A failure class this check reports in a testcase of its own; the generation verdict of
    # a cell defers it (pipeline.decide's `checked_elsewhere`) while this check is selected.
    owns: FailureClass | None = None
    groups: tuple[str, ...] = ()  # selection words besides the name ("static", "structural")
    marks: tuple[str, ...] = ()  # pytest markers of its test (harness/plugin.py registers them)
    doc: str = ""

    @property
    def test_name(self) -> str:
        """The test function pytest collects; the lab names its records the same way."""
        return f"test_{self.name}"

    def testcase(self, instance: Instance) -> str:
        """The JUnit testcase name both doors write: test_generation[qnn/qnn-cat]."""
        return f"{self.test_name}[{instance.id}]" if instance.id else self.test_name


@dataclass(frozen=True)
class Suite:
    """A named, ordered list of checks for the model types it fits (empty: any type)."""

    name: str
    checks: tuple[Check[Any], ...]
    model_types: tuple[str, ...] = ()
    visual: bool | None = None  # None: as the export says (llm_config.json is_visual)
    doc: str = ""
    options: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    runner: RunnerKind = RunnerKind.LLM_DEMO  # the runner its device checks drive (runners/base.py)
    formats: tuple[str, ...] = ()  # the quant formats a Scope.FORMAT check covers

    def check(self, name: str) -> Check[Any]:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def fit_reason(self, model_type: str) -> str | None:
        """Why this suite does not fit an export of `model_type` (None: it fits)."""
        if not self.model_types or model_type in self.model_types:
            return None
        return (f"model type is {model_type!r} (llm_config.json), not {' or '.join(self.model_types)}: "
                f"suite {self.name} does not fit this export")

    def pairs(self, visual: bool) -> tuple[BackendPair, ...]:
        """Every backend pair the suite covers (the matrix it parametrizes)."""
        return BackendPair.all(visual=self.visual if self.visual is not None else visual)

    def instances(self, check: Check[Any], *, visual: bool, case_ids: Sequence[str]) -> list[Instance]:
        """The testcases of `check`, in the order pytest parametrizes them."""
        if check.scope is Scope.CELL:
            return [Instance(p, c) for p in self.pairs(visual) for c in case_ids]
        if check.scope is Scope.PAIR:
            return [Instance(p) for p in self.pairs(visual)]
        if check.scope is Scope.FORMAT:
            return [Instance(quant=q) for q in self.formats]
        return [Instance()]

    def select(self, words: Sequence[str] | None) -> Suite:
        """The suite with only the checks `words` name (a check's name or one of its groups);
        None or empty: every check. KeyError naming the first unknown word."""
        if not words:
            return self
        known = {c.name for c in self.checks} | {g for c in self.checks for g in c.groups}
        for w in words:
            if w not in known:
                raise KeyError(w)
        chosen = tuple(c for c in self.checks if c.name in words or set(c.groups) & set(words))
        return Suite(self.name, chosen, self.model_types, self.visual, self.doc, self.options, self.runner,
                     self.formats)

    def deferred_classes(self, check: Check[Any]) -> frozenset[FailureClass]:
        """Classes other selected checks report on their own (see Check.owns)."""
        return frozenset(c.owns for c in self.checks if c is not check and c.owns is not None)

    def words(self) -> list[str]:
        """Every name and group a plan or `--checks` may select."""
        return sorted({c.name for c in self.checks} | {g for c in self.checks for g in c.groups})
