"""An end-to-end night against a virtual lab of 4 devices: 3 adb (on two adb servers, i.e. two
lab hosts) and 1 ssh board. One device drops mid-suite and never comes back; one device's
export makes llm_demo crash on QNN. Every other result is delivered, the lost device is
quarantined, and JUnit, SQLite and HTML are written."""

from __future__ import annotations

import threading

import pytest
import yaml
from junitparser import Failure, JUnitXml

from harness.lab import jobs, lock_state, run_night
from harness.lab.plan import load_plan
from harness.report import History
from harness.transport import RetryPolicy, open_transport

pytestmark = pytest.mark.slow

VICTIM, CRASHER = "sm8550-hdk", "sm8650-qrd"
FAST_RETRY = RetryPolicy(attempts=2, wait_initial=0.2, wait_max=0.5, max_seconds=5)


def _devices():
    from virtual_lab.lab import LabDeviceConfig

    return [
        LabDeviceConfig("oneplus13", soc="SM8750", htp_arch="v79", tags=("phone", "nightly")),
        LabDeviceConfig(CRASHER, soc="SM8650", htp_arch="v75", model="SM8650-QRD", product="pineapple",
                        device="pineapple", manufacturer="QTI", tags=("board", "nightly")),
        LabDeviceConfig(VICTIM, soc="SM8550", htp_arch="v73", model="SM8550-HDK", product="kalama",
                        device="kalama", manufacturer="QTI", adb_server=1, tags=("board", "nightly")),
        LabDeviceConfig("sa8295-car", transport="ssh", soc="SA8295", htp_arch="v68", tags=("car", "nightly")),
    ]


class Unplug:
    """Opens real transports; pulls the victim's plug as its last llm_demo (of 4) starts.

    The ssh board is the host itself, so the virtual runtime cannot read a SoC from its
    build.prop; its llm_demo gets VLAB_SOC_MODEL as the runner tests pass it (a real board's
    runtime knows its SoC from the hardware)."""

    def __init__(self, lab):
        self.lab = lab
        self.fired = threading.Event()
        self.llm_demo_calls = 0

    def __call__(self, device):
        t = open_transport(device, retry=FAST_RETRY)
        if device.name == VICTIM:
            real = t.shell

            def shell(args, **kw):
                if str(args[0]).endswith("llm_demo") and not self.fired.is_set():
                    self.llm_demo_calls += 1
                    if self.llm_demo_calls == 4:
                        self.fired.set()
                        self.lab.adb_device(VICTIM).faults.offline_for(3600)
                return real(args, **kw)

            t.shell = shell
        elif device.transport.name == "ssh":
            real_ssh = t.shell

            def board_shell(args, **kw):
                if str(args[0]).endswith(("llm_demo", "llm_logits_diff")):
                    kw["env"] = {**(kw.get("env") or {}), "VLAB_SOC_MODEL": device.soc_model}
                return real_ssh(args, **kw)

            t.shell = board_shell
        return t


def _exports(root, lab, inventory):
    from virtual_lab.exports import default_behaviour, make_qwen3_export

    for d in inventory.devices.values():
        behaviour = default_behaviour(False)
        if d.name == CRASHER:
            # This device's export segfaults llm_demo on the QNN LLM (text pair "qnn" = cpu/qnn).
            behaviour["prompts"].setdefault("", {}).setdefault("cpu/qnn", {})["fault"] = "crash"
        make_qwen3_export(root / "exports" / d.name, soc_id=d.soc_id, dsp_arch=d.htp_arch, vtcm_mb=d.vtcm_mb,
                          size_mb=1, behaviour=behaviour)
        lab.runtime_dir(d.htp_arch)


def test_night_on_a_virtual_lab(vlab_factory, tmp_path):
    lab = vlab_factory(devices=_devices())
    inv = lab.inventory
    servers = {str(d.adb_server) for d in inv.devices.values() if d.transport.name == "adb"}
    assert len(servers) == 2  # two lab hosts' adb servers, one controller
    _exports(tmp_path, lab, inv)
    plan_path = tmp_path / "nightly.yaml"
    plan_path.write_text(yaml.safe_dump({
        "name": "vlab-night", "tags": ["nightly"],
        "models": {"qwen3": {"path": "exports/{device}"}},
        "suites": [{"name": "matrix", "runner": "llm_demo", "models": ["qwen3"], "backends": ["qnn", "cpu"]}],
        "options": {"runtime_dir": str(lab.root / "runtimes" / "mnn-{htp_arch}"), "qnn_sdk": str(lab.qnn_sdk_dir),
                    "max_new_tokens": 24, "timeout_s": 120},
        "health": {"min_free_mb": 1},
        "locks": {"dir": "locks", "wait_s": 5},
        "recovery": {"reconnect_s": 2, "max_faults": 2},
    }))
    plan = load_plan(plan_path)
    unplug = Unplug(lab)
    said = []
    night = run_night(plan, inv, tmp_path / "out", jobs.llm_matrix_job, transport_factory=unplug,
                      say=said.append)
    outcomes = {n: o.status for n, o in night.devices.items()}
    assert unplug.fired.is_set()
    assert outcomes == {"oneplus13": "completed", CRASHER: "completed", VICTIM: "quarantined",
                        "sa8295-car": "completed"}, "\n".join(said)
    recs = night.records()
    by_dev = {}
    for r in recs:
        by_dev.setdefault(r.device, []).append(r)
    # Healthy devices: every (pair, prompt) result delivered and passing.
    for name in ("oneplus13", "sa8295-car"):
        got = {(r.backend_pair, r.status) for r in by_dev[name]}
        assert got == {("qnn", "passed"), ("cpu", "passed"), (None, "passed")}, \
            [(r.name, r.failure_class, r.message) for r in by_dev[name]]
        cells = [r for r in by_dev[name] if r.backend_pair]
        assert len(cells) == 4 and all(r.decode_tps for r in cells)
        assert [r.name for r in by_dev[name] if not r.backend_pair] == ["test_export_verdict"], \
            [r.name for r in by_dev[name]]
    # The crashing export: QNN runs crash (a test failure, not retried), CPU passes.
    crash = [r for r in by_dev[CRASHER] if r.backend_pair == "qnn"]
    assert crash and all(r.status == "failed" and r.failure_class == "crash" and r.attempts == 1 for r in crash)
    assert all(r.status == "passed" for r in by_dev[CRASHER] if r.backend_pair == "cpu")
    # The victim: what ran before the drop is kept; the drop is recorded and the device quarantined.
    victim = by_dev[VICTIM]
    assert not [r for r in victim if r.failure_class == "transport-error"]
    lost = [r for r in victim if r.signature == "lab:device-lost"]
    assert len(lost) == 1 and lost[0].failure_class == "quarantined"
    assert "did not come back" in night.devices[VICTIM].reason
    assert sorted(r.name for r in victim if r.status == "passed") == [
        "test_generation[cpu-cat]", "test_generation[cpu-france]", "test_generation[qnn-france]"]
    # Locks released.
    assert all(not lock_state(tmp_path / "locks", n).held for n in outcomes)

    # JUnit: one suite per device, the crash carries its class and log excerpt.
    xml = JUnitXml.fromfile(str(night.reports["junit"]))
    suites = {s.name: s for s in xml}
    assert set(suites) == set(outcomes)
    assert {p.name: p.value for p in suites[CRASHER].properties()}["soc"] == "SM8650"
    failures = [c.result[0] for c in suites[CRASHER] if c.result and isinstance(c.result[0], Failure)]
    assert failures and all(f.type == "crash" for f in failures) and all(f.text for f in failures)
    # SQLite history: this night, per device/model/pair.
    with History(night.reports["history"]) as h:
        rows = {(r.device, r.backend_pair): r for r in h.results([night.run_id])}
    assert rows[(CRASHER, "qnn")].status == "failed" and rows[(CRASHER, "qnn")].failure_classes == ("crash",)
    assert rows[("oneplus13", "qnn")].decode_tps > 0
    # HTML: the matrix of every device and the quarantine reason.
    page = night.reports["html"].read_text()
    for name in outcomes:
        assert f'id="matrix-{name}"' in page
    assert 'class="status-quarantined">quarantined' in page
