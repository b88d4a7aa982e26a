"""QNN's profiling switched on at run time on the host's HTP emulator, as `qnn_executor_runner
--profile_level 2` does it (harness/hostrt/executorch/backend_options.py): the plain program of
../shared's et-qnn-host, lowered without profiling, gives QNN's per-op cycles in its ETDump; an
unknown level is refused with the levels named. One real run (~20 s on an idle 2-core host, 70 s
at load 14)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.hostrt.executorch.backend_options import set_profile_level
from harness.inventory import parse_inventory
from harness.provision import provision_emulator_runtime
from harness.runners.executorch import ExecutorchRunner, analyse_qnn_etdump
from harness.transport import LocalTransport
from tests.qnn.material import ET_QNN, emulator_extras_or_skip

PTE = ET_QNN / "pte" / "qwen3-16a4w-sm8650.pte"


def _runner(tmp_path: Path) -> ExecutorchRunner:
    emulator_extras_or_skip()
    if not PTE.is_file():
        pytest.skip(f"{PTE} is absent: the plain QNN program of ../shared's et-qnn-host")
    inv = parse_inventory({"devices": [{"name": "emu", "transport": "local", "soc": "SM8650", "htp": "emulator",
                                        "work_dir": str(tmp_path / "work")}]}, tmp_path / "devices.yaml")
    transport = LocalTransport(inv.get("emu"))
    return ExecutorchRunner(transport, provision_emulator_runtime(transport), str(tmp_path / "work" / "runs"))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_profile_level_2_at_run_time_gives_per_op_cycles(tmp_path: Path) -> None:
    runner = _runner(tmp_path)
    inp = str(PTE.with_name("qwen3-16a4w-sm8650.input.npy"))
    run = runner.forward(str(PTE), [inp], local_dir=tmp_path / "out", etdump=True, iterations=2, profile_level=2)
    assert run.ok and run.etdump is not None, run.failure()
    view = analyse_qnn_etdump(run.etdump, None, clock="emulator")
    ops = [e for e in view.ops if e.io is None]
    assert view.profiled and len(ops) == 131 and all(len(e.cycles) == 2 for e in ops)


def test_an_unknown_level_is_refused_with_the_levels() -> None:
    with pytest.raises(RuntimeError, match=r"QNN's levels are 0 \(off\), 1 \(basic\) and 2 \(per op\)"):
        set_profile_level(7)
