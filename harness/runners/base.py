"""The runner interface a suite drives (harness/suite/model.py `Suite.runner`): which runner
a suite's checks need, what its times mean, and how its leftovers go. llm_demo
(`runners/llm_demo/`) and ExecuTorch (`runners/executorch_suite.py`) implement it, so the
pipeline and the night's job are not tied to llm_demo (harness/lab/jobs.py picks the job by
`RunnerKind`)."""

from __future__ import annotations

import enum
from typing import Protocol, runtime_checkable

from harness.evidence import Clock
from harness.provision import ProvisionedRuntime
from harness.transport import RunsAndMovesFiles


class RunnerKind(enum.StrEnum):
    """The runner a suite's device checks call; also a plan suite's `runner:` word."""

    LLM_DEMO = "llm_demo"  # MNN's llm_demo over the backend matrix (pipeline.run_matrix)
    EXECUTORCH = "executorch"  # ExecuTorch's LLM runner and its pybindings over the quant formats


@runtime_checkable
class SuiteRunner(Protocol):
    """What the suite model and the pipeline need of a runner: where it runs (transport, the
    provisioned runtime), what kind it is, and its cleanup after the checks."""

    transport: RunsAndMovesFiles
    runtime: ProvisionedRuntime

    @property
    def kind(self) -> RunnerKind: ...

    @property
    def timing(self) -> Clock:
        """What its times mean: on the device, or on the host's HTP emulator
        (docs/executorch-runner.md#the-htp-emulator: emulator timings are not device speed)."""

    def cleanup(self) -> None: ...


__all__ = ["RunnerKind", "SuiteRunner"]
