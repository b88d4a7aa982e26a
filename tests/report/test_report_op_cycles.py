"""Per-op cycles night to night (harness/report/op_history.py): kept in the history, a night's ops
slower than the last good night beyond the noise are named with their module, a failed night is
no baseline, a night within the noise names nothing, and the HTML shows the per-op plot.
The cycles are the shape of a real profile of the example decoder (a layer's MLP linears the
largest ops); the real runs are in benchmarks/op_cycles_nights.py."""

from __future__ import annotations

from pathlib import Path

from harness.evidence import OpCycle, OpCycles
from harness.outcomes import FailureClass, Status
from harness.report import History, TestRecord
from harness.report.html import write_html
from harness.report.op_history import NOISE

LAYER_OPS = (("ln_mlp", "aten.native_layer_norm.default", 60_000.0), ("gate", "aten.linear.default", 400_000.0),
             ("up", "aten.linear.default", 400_000.0), ("mul", "aten.mul.Tensor", 30_000.0),
             ("down", "aten.linear.default", 380_000.0))


def _ops(heavier: int | None = None, scale: float = 1.0) -> OpCycles:
    ops = []
    for layer in range(2):
        for i, (name, op, cycles) in enumerate(LAYER_OPS):
            widened = 8.0 if layer == heavier and op == "aten.linear.default" else 1.0
            ops.append(OpCycle(f"aten_{name}_default_{layer * 10 + i}", cycles * widened * scale, 5, op,
                               f"layers.{layer}.{name}"))
    return OpCycles("model.pte", "cycles, emulator", 2, tuple(ops))


def _night(h: History, night: str, at: float, cycles: OpCycles, status: Status = Status.PASSED) -> None:
    rec = TestRecord("test_etdump_profile", "executorch_qnn", "emu-sm8650", status=status, model="decoder",
                     failure_class=FailureClass.CHECK_FAILED if status is Status.FAILED else None)
    rec.put(cycles)
    h.add_night(night, [rec], started_at=at)


def test_a_heavier_layer_is_named_and_noise_is_not(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as h:
        _night(h, "n1", 1.0, _ops())
        _night(h, "n2", 2.0, _ops(scale=NOISE * 0.95))  # within the noise: nothing named
        assert not [r for r in h.regressions("n2") if r.kind == "op-cycles"]
        _night(h, "n3", 3.0, _ops(heavier=1), Status.FAILED)  # a failed night: named, and no baseline later
        _night(h, "n4", 4.0, _ops(heavier=1))
        named = [r for r in h.regressions("n4") if r.kind == "op-cycles"]
        assert sorted(r.metric.split(" ")[0] for r in named) == [
            "aten_down_default_14", "aten_gate_default_11", "aten_up_default_12"]
        assert all("in layers.1." in r.metric and "of model.pte" in r.metric for r in named)
        down = next(r for r in named if r.metric.startswith("aten_down"))
        # against n2 (the last good night before n4), not n3 (failed)
        assert down.baseline == 380_000.0 * NOISE * 0.95 and down.tonight == 380_000.0 * 8
        assert "slower: 3,040,000 vs" in down.describe()
        page = write_html([], tmp_path / "out", title="t", history=h, regressions=named, night_id="n4")
    html = page.read_text()
    assert "Per-op cycles against the last good night" in html and "emu-sm8650: model.pte" in html
    assert (tmp_path / "out" / "plots" / "ops-emu-sm8650-model.pte.png").stat().st_size > 1000


def test_an_op_on_another_clock_or_new_is_not_compared(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as h:
        _night(h, "n1", 1.0, _ops())
        device = _ops(heavier=0)
        _night(h, "n2", 2.0, OpCycles(device.program, "cycles", 2, device.ops))  # a device's cycles, not the emulator's
        assert not [r for r in h.regressions("n2") if r.kind == "op-cycles"]
        assert not [r for r in h.regressions("n1") if r.kind == "op-cycles"]  # the first night has no baseline


def test_an_op_that_spread_over_its_good_nights_is_judged_by_its_own_band(tmp_path: Path) -> None:
    """Repeated nights of one program are its ops' noise: an op that once ran 3x (a loaded host)
    is named only above NOISE times that, however far above the last good night it is."""
    with History(tmp_path / "h.sqlite") as h:
        _night(h, "n1", 1.0, _ops(scale=3.0))
        _night(h, "n2", 2.0, _ops())
        _night(h, "n3", 3.0, _ops(scale=2.5))  # 2.5x the last good night, within its band
        assert not [r for r in h.regressions("n3") if r.kind == "op-cycles"]
        _night(h, "n4", 4.0, _ops(heavier=0, scale=1.0))  # layer 0's linears 8x: above 1.6 x 3.0
        named = sorted(r.metric.split(" ")[0] for r in h.regressions("n4") if r.kind == "op-cycles")
        assert named == ["aten_down_default_4", "aten_gate_default_1", "aten_up_default_2"]
