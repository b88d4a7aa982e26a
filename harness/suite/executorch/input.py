"""The ExecuTorch suite's input for one device, built the same way by both doors
(suites/executorch_qnn/conftest.py, harness/lab/et_job.py), so they run the same programs on
the same runner: the lane follows from the device (docs/executorch-runner.md#lanes):

* an emulated HTP (`htp: emulator`): ExecuTorch's host runners with the host's QAIRT
  libraries on their loader path (provision/emulator.py);
* the host (no HTP) without a runtime folder: ExecuTorch's real LLM runner on the CPU;
* any other device: the runtime folder the door provisions (`qnn_llama_runner` and friends).
"""

from __future__ import annotations

import posixpath
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.checks import QuantBudget
from harness.errors import ProvisionError
from harness.hostrt.executorch import make_runtime_dir
from harness.inventory import DeviceSpec
from harness.provision import ProvisionedRuntime, provision_emulator_runtime, provision_runtime
from harness.report import TestRecord
from harness.runners.executorch import ExecutorchRunner
from harness.suite.executorch.checks import EtInput
from harness.transport import Transport


def is_host_lane(device: DeviceSpec, runtime_dir_given: bool) -> bool:
    return not device.has_htp and not runtime_dir_given


def _host_runtime(transport: Transport) -> ProvisionedRuntime:
    with tempfile.TemporaryDirectory(prefix="harness-et-host-") as scratch:
        return provision_runtime(transport, make_runtime_dir(Path(scratch)), need_qnn=False)


def build_et_input(transport: Transport, model_dir: Path, *, work: Path,
                   device_runtime: Callable[[], ProvisionedRuntime] | None, qnn_sdk: Path | None = None,
                   timeout: float = 600.0, runtime_option: str = "--runtime-dir",
                   siblings: Callable[[], Sequence[TestRecord]] = lambda: (), localize: bool = False,
                   expected_cpu_ops: Mapping[str, int] | None = None,
                   quant_budgets: Mapping[str, QuantBudget] | None = None, allow_unjudged: bool = False,
                   export_format: str | None = None, seq_len: int = 128,
                   reference_dir: Path | None = None) -> EtInput:
    """`device_runtime`: the door's runtime for a real device (None: it has no runtime folder);
    `siblings`: the device's records so far; `localize`: localize every format, not only failed ones;
    `expected_cpu_ops`: CPU ops allowed beyond the suite's (a plan's key, --expect-cpu-ops);
    `quant_budgets`, `allow_unjudged`: the verdict's (a plan's keys, --quant-budget, --allow-unjudged);
    `export_format`: a lone export's quant format when its records name none (--export-format);
    `seq_len`: the LLM runner's context for a QNN program's run (a plan's `options: {seq_len: N}`);
    `reference_dir`: a folder holding reference/ for every program (a declared reference)."""
    device = transport.device
    host_lane = is_host_lane(device, device_runtime is not None)

    def make_runner() -> ExecutorchRunner:
        if device.emulated:
            runtime = provision_emulator_runtime(transport, qnn_sdk=qnn_sdk)
        elif host_lane:
            runtime = _host_runtime(transport)
        elif device_runtime is None:
            raise ProvisionError(f"{device.name}: no ExecuTorch runtime folder; pass {runtime_option} (the folder "
                                 "holding qnn_llama_runner and its libraries)")
        else:
            runtime = device_runtime()
        return ExecutorchRunner(transport, runtime, posixpath.join(device.work_dir, "et-runs"))

    return EtInput(device, transport, model_dir, make_runner, work, host_lane, timeout, siblings=siblings,
                   localize=localize, expected_cpu_ops=expected_cpu_ops, quant_budgets=quant_budgets,
                   allow_unjudged=allow_unjudged, export_format=export_format, seq_len=seq_len,
                   reference_dir=reference_dir)


__all__ = ["build_et_input", "is_host_lane"]
