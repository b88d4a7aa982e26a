"""`make demo`: the main job against the built-in virtual lab.

1. Starts a virtual OnePlus 13 (real adb server, emulated adbd), writes Qwen3-VL exports, and
   runs `pytest suites/qwen3_vl` once per scenario: a good export must pass; five broken ones
   must fail with the right reason.
2. Runs the other front door, a lab night of suite qwen3_vl on the virtual OnePlus 13 over the
   same scenario exports, and compares the two doors check by check: the same testcase names
   and, for each, the same status and failure class (one suite, harness/suite/).
3. Runs a nightly lab job over the default virtual lab (OnePlus 13, SM8650 board, SA8295 car
   over ssh), each device with the Qwen3-VL export built for its SoC, and writes the JUnit,
   SQLite history and HTML report; its JUnit holds every testcase the pytest run holds.
Exits 1 when anything did not behave as expected. Everything lands in out/demo/.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.outcomes import FailureClass, NightOutcome, Status
from harness.report import TestRecord

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Expect:
    test: str  # substring of the failing test's name
    reason: str  # regex the failure message must match


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    knobs: Callable[[], dict[str, Any]]
    failures: tuple[Expect, ...] = ()  # empty: everything must pass


def _garbled_qnn() -> dict[str, Any]:
    from virtual_lab.exports import default_behaviour

    beh = default_behaviour(True)
    beh["prompts"]["Describe a cat"]["qnn/qnn"] = {
        "text": "A cat is a cat is a cat is a cat is a cat is a cat is a cat is a cat is a cat is a cat"}
    return {"behaviour": beh}


def _position_bug() -> dict[str, Any]:
    from virtual_lab.exports import default_behaviour

    beh = default_behaviour(True)
    beh["prompts"]["<img>"]["qnn/qnn"] = {"posdbg": "chunk_local_bug"}
    beh["prompts"]["<img>"]["cpu/cpu"] = {"posdbg": "ok"}
    return {"behaviour": beh}


SCENARIOS = (
    Scenario("good", "healthy export", lambda: {}),
    Scenario("garbled-qnn", "QNN/QNN answers in a loop", _garbled_qnn,
             (Expect("test_generation[qnn/qnn-cat]", r"repetition|garbled"),)),
    Scenario("no-deepstack", "visual graph lacks deepstack_feature",
             lambda: {"visual_outputs": ("image_embeds",)},
             (Expect("test_export_shapes", r"deepstack_feature"),
              Expect("test_generation[qnn/qnn-image]", r"shape"))),
    Scenario("placeholder-311", "deepstack_embeds compiled as [3,1,1]", lambda: {"deepstack_placeholder": True},
             (Expect("test_export_shapes", r"\[3, ?1, ?1\]"),
              Expect("test_generation[cpu/qnn-france]", r"shape"))),
    Scenario("position-bug", "chunk-local mRoPE indexing in QNN/QNN", _position_bug,
             (Expect("test_mrope_positions[qnn/qnn]", r"chunk_local_bug"),)),
    Scenario("saturated", "MLP Mul ranges copied from an operand", lambda: {"scenario": "activation_saturation"},
             (Expect("test_quant_metadata", r"inherited from an operand in 28 of 28 blocks"),
              Expect("test_generation[", r"drift|disagree"))),
)


@dataclass
class Outcome:
    scenario: Scenario
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # test name -> message
    skipped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def as_expected(self) -> bool:
        return not self.problems


def read_junit(path: Path) -> tuple[list[str], dict[str, str], list[str]]:
    passed, failed, skipped = [], {}, []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if bad is not None:
            failed[name] = (bad.get("message") or "") + "\n" + (bad.text or "")
        elif case.find("skipped") is not None:
            skipped.append(name)
        else:
            passed.append(name)
    return passed, failed, skipped


def judge(outcome: Outcome) -> None:
    sc = outcome.scenario
    if not outcome.passed:
        outcome.problems.append("no test passed")
    if not sc.failures:
        outcome.problems += [f"{t} failed: {m.splitlines()[0][:160]}" for t, m in outcome.failed.items()]
        return
    for exp in sc.failures:
        hits = {t: m for t, m in outcome.failed.items() if exp.test in t}
        if not hits:
            outcome.problems.append(f"expected {exp.test} to fail, it did not")
        elif not any(re.search(exp.reason, m) for m in hits.values()):
            outcome.problems.append(f"{exp.test} failed for another reason: {next(iter(hits.values()))[:200]}")


def write_exports(out_dir: Path, scenarios: tuple[Scenario, ...] = SCENARIOS) -> None:
    """Each scenario's export under out_dir/exports/<name>, written once for both doors."""
    from virtual_lab.exports import make_qwen3_vl_export

    for sc in scenarios:
        make_qwen3_vl_export(out_dir / "exports" / sc.name, **sc.knobs())


def run_scenarios(out_dir: Path, scenarios: tuple[Scenario, ...] = SCENARIOS, say: Callable[[str], None] = print) -> list[Outcome]:
    """pytest suites/qwen3_vl once per scenario on a virtual OnePlus 13, over write_exports's exports."""
    from virtual_lab.lab import VirtualLab, default_devices

    out_dir.mkdir(parents=True, exist_ok=True)
    outcomes = []
    with VirtualLab(out_dir / "lab", [default_devices()[0]]) as lab:
        runtime = lab.runtime_dir("v79")
        sdk = lab.qnn_sdk_dir
        say(f"virtual lab up: {lab.inventory.get('oneplus13').describe()}")
        for sc in scenarios:
            export = out_dir / "exports" / sc.name
            junit = out_dir / f"{sc.name}.xml"
            cmd = [sys.executable, "-m", "pytest", str(REPO / "suites" / "qwen3_vl"), "-q", "-p", "no:cacheprovider",
                   "--device", "oneplus13", "--devices-file", str(lab.devices_yaml), "--model-dir", str(export),
                   "--runtime-dir", str(runtime), "--qnn-sdk", str(sdk), f"--junitxml={junit}",
                   f"--harness-records={out_dir / (sc.name + '.records.jsonl')}"]
            started = time.monotonic()
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
            outcome = Outcome(sc, wall_s=time.monotonic() - started)
            (out_dir / f"{sc.name}.log").write_text(proc.stdout + proc.stderr)
            if not junit.exists():
                outcome.problems.append(f"pytest wrote no JUnit (exit {proc.returncode}): {proc.stdout[-400:]}")
            else:
                outcome.passed, outcome.failed, outcome.skipped = read_junit(junit)
                judge(outcome)
            outcomes.append(outcome)
            mark = "ok " if outcome.as_expected else "BAD"
            fails = ", ".join(sorted(outcome.failed)) or "-"
            say(f"[{mark}] {sc.name:<16} {sc.what:<40} passed {len(outcome.passed):>2}  failed {len(outcome.failed):>2}"
                f"  ({outcome.wall_s:.1f}s)  failing: {fails}")
            for p in outcome.problems:
                say(f"       problem: {p}")
    return outcomes


def run_lab_night(out_dir: Path, say: Callable[[str], None] = print, pytest_names: set[str] | None = None) -> bool:
    """The nightly job over the default virtual lab; True when every device completed with
    nothing failing and (given `pytest_names`) its JUnit holds every one of those testcases."""
    import yaml

    from harness.lab import run_night, suite_job
    from harness.lab.plan import load_plan
    from virtual_lab.exports import make_qwen3_vl_export
    from virtual_lab.lab import VirtualLab

    out_dir.mkdir(parents=True, exist_ok=True)
    with VirtualLab(out_dir / "lab") as lab:
        inventory = lab.inventory
        for d in inventory.devices.values():  # QNN exports are compiled per SoC
            make_qwen3_vl_export(out_dir / "exports" / d.htp_arch, soc_id=d.soc_id, dsp_arch=d.htp_arch,
                                 vtcm_mb=d.vtcm_mb, size_mb=2)
        plan_path = out_dir / "nightly.yaml"
        plan_path.write_text(yaml.safe_dump({
            "name": "demo-night", "tags": ["virtual"],
            "models": {"qwen3-vl": {"path": str(out_dir / "exports" / "{htp_arch}")}},
            "suites": [{"name": "qwen3_vl", "runner": "llm_demo", "models": ["qwen3-vl"]}],
            "options": {"runtime_dir": str(lab.root / "runtimes" / "mnn-{htp_arch}"), "qnn_sdk": str(lab.qnn_sdk_dir),
                        "max_new_tokens": 32, "timeout_s": 120},
            "health": {"min_free_mb": 64},
            "locks": {"dir": str(out_dir / "locks"), "wait_s": 30},
            "history": {"db": str(out_dir / "history.sqlite")},
        }, sort_keys=False))
        for d in inventory.devices.values():
            lab.runtime_dir(d.htp_arch)
        night = run_night(load_plan(plan_path), inventory, out_dir / "night", suite_job, say=lambda _m: None)
    ok = True
    for name, outcome in sorted(night.devices.items()):
        recs = [r for r in night.records() if r.device == name]
        passed = sum(r.status is Status.PASSED for r in recs)
        bad = [r.name for r in recs if r.is_bad]
        good = outcome.status is NightOutcome.COMPLETED and recs and not bad
        ok &= bool(good)
        say(f"[{'ok ' if good else 'BAD'}] night {name:<12} {outcome.status:<11} {passed}/{len(recs)} passed "
            f"({len(recs) - passed - len(bad)} skipped) in {outcome.wall_s:.1f}s" + (f"; failing: {bad}" if bad else ""))
    if pytest_names is not None:
        night_names = {c.get("name", "") for c in ET.parse(night.reports["junit"]).getroot().iter("testcase")}
        missing = sorted(pytest_names - night_names)
        ok &= not missing
        say(f"[{'ok ' if not missing else 'BAD'}] night JUnit holds {len(pytest_names - set(missing))} of the "
            f"{len(pytest_names)} testcases of the pytest run" + (f"; missing: {missing}" if missing else ""))
    for kind in ("junit", "history", "html"):
        if kind in night.reports:
            say(f"      {kind}: {night.reports[kind]}")
    return ok


Verdicts = dict[str, tuple[Status, FailureClass | None]]  # testcase name -> (status, failure class)


def pytest_verdicts(out_dir: Path, scenario: str) -> Verdicts:
    """A scenario's pytest records (--harness-records), by JUnit testcase name."""
    out: Verdicts = {}
    for line in (out_dir / f"{scenario}.records.jsonl").read_text().splitlines():
        rec = TestRecord.from_dict(json.loads(line))
        out[rec.name.rsplit("::", 1)[-1]] = (rec.status, rec.failure_class)
    return out


def run_doors_night(out_dir: Path, scenarios: tuple[Scenario, ...] = SCENARIOS) -> dict[str, Verdicts]:
    """The lab door onto the same scenario exports run_scenarios wrote: one night of suite
    qwen3_vl on the virtual OnePlus 13, one plan model per scenario. Verdicts per scenario."""
    import yaml

    from harness.lab import run_night, suite_job
    from harness.lab.plan import load_plan
    from virtual_lab.lab import VirtualLab, default_devices

    with VirtualLab(out_dir / "doors-lab", [default_devices()[0]]) as lab:
        plan_path = out_dir / "doors.yaml"
        plan_path.write_text(yaml.safe_dump({
            "name": "doors", "devices": ["oneplus13"],
            "models": {sc.name: {"path": str(out_dir / "exports" / sc.name)} for sc in scenarios},
            "suites": [{"name": "qwen3_vl", "models": [sc.name for sc in scenarios]}],
            "options": {"runtime_dir": str(lab.runtime_dir("v79")), "qnn_sdk": str(lab.qnn_sdk_dir),
                        "timeout_s": 300},
            "locks": {"dir": str(out_dir / "doors-locks"), "wait_s": 30},
        }, sort_keys=False))
        night = run_night(load_plan(plan_path), lab.inventory, out_dir / "doors-night", suite_job,
                          say=lambda _m: None, history_db=out_dir / "doors-history.sqlite")
    out: dict[str, Verdicts] = {sc.name: {} for sc in scenarios}
    for rec in night.records():
        scenario = rec.model.split(" (", 1)[0]
        if scenario in out:
            out[scenario][rec.name] = (rec.status, rec.failure_class)
    return out


def run_both_doors(out_dir: Path, scenarios: tuple[Scenario, ...] = SCENARIOS,
                   say: Callable[[str], None] = print) -> tuple[list[Outcome], dict[str, Verdicts]]:
    """The scenarios through pytest and the doors night over the same exports, at once: each door
    has its own virtual lab and claim folder, and each mostly waits on its own child processes
    (pytest runs, the device's runner), so on two cores both finish in about the longer one's time."""
    from concurrent.futures import ThreadPoolExecutor

    write_exports(out_dir, scenarios)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="doors-night") as pool:
        night = pool.submit(run_doors_night, out_dir, scenarios)
        outcomes = run_scenarios(out_dir, scenarios, say=say)
        return outcomes, night.result()


def compare_doors(pytest_side: Verdicts, lab_side: Verdicts) -> list[str]:
    """Every difference between the doors, check by check (empty: they agree)."""
    problems = [f"{n}: only in the pytest run" for n in sorted(set(pytest_side) - set(lab_side))]
    problems += [f"{n}: only in the lab night" for n in sorted(set(lab_side) - set(pytest_side))]
    problems += [f"{n}: pytest {pytest_side[n]}, lab {lab_side[n]}" for n in sorted(set(pytest_side) & set(lab_side))
                 if pytest_side[n] != lab_side[n]]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.demo")
    parser.add_argument("--out", default=str(REPO / "out" / "demo"))
    parser.add_argument("--no-night", action="store_true", help="skip the lab night stage")
    args = parser.parse_args(argv)
    lab_side: dict[str, Verdicts] = {}
    if args.no_night:
        write_exports(Path(args.out))
        outcomes = run_scenarios(Path(args.out))
    else:
        outcomes, lab_side = run_both_doors(Path(args.out))
    good = all(o.as_expected for o in outcomes)
    print(f"\ndemo: {sum(o.as_expected for o in outcomes)}/{len(outcomes)} scenarios behaved as expected; "
          f"JUnit in {args.out}\n")
    if not args.no_night:
        for o in outcomes:
            problems = compare_doors(pytest_verdicts(Path(args.out), o.scenario.name), lab_side[o.scenario.name])
            good &= not problems
            print(f"[{'ok ' if not problems else 'BAD'}] doors {o.scenario.name:<16} pytest and lab night agree on "
                  f"{len(lab_side[o.scenario.name]) - len(problems)} testcases" + "".join(f"\n       {p}" for p in problems))
        names = set(pytest_verdicts(Path(args.out), SCENARIOS[0].name))
        night_ok = run_lab_night(Path(args.out) / "lab-night", pytest_names=names)
        print(f"\ndemo: lab night {'delivered every result' if night_ok else 'did NOT go as expected'}")
        good &= night_ok
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
