"""Issue 44's rows re-run as one batch: held (the case works) or clear (a clear error with the
README's exit code), 0 tracebacks, 0 exit 3 from bad input.

Each row's case as a user meets it where it can be built in a second (the CLI in a child process:
localize on a damaged debug build or a FIFO, `harness devices` into /dev/full or a closed pipe,
a plan placeholder with a format spec); else the row's own test, which builds the fault (a locked
history, a read-only cache folder, a network failure in the exporter, a damaged catalogue ...).
The stop at scale and the re-provision ratio are benchmarks of their own (lab_scale.py,
provision.py --only-unchanged, adb_connect_burst.py); this prints their commands.

    python benchmarks/probe44_rows.py [--no-tests]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
GOOD_QUANT: dict[str, object] = {"scale": 0.1, "zero_point": 0, "quant_min": 0, "quant_max": 255, "dtype": "uint8"}
GOOD_NODE: dict[str, object] = {"name": "aten_mul_tensor", "target": "aten.mul.Tensor", "shape": [1, 4],
             "quant": GOOD_QUANT}

# The rows whose case is its test (added with the fix; each failed before it).
TESTS = {
    "1 damaged debug build (ETRecord reuse)": "tests/runners/test_localize_device.py::"
    "test_a_reused_work_folder_compares_against_this_builds_etrecord",
    "1 damaged debug build in a night": "tests/suites/test_executorch_localize.py::"
    "test_a_damaged_debug_build_fails_by_name_not_as_an_internal_error",
    "3 exporter network/IO faults not sealed": "tests/lab/test_exports_classify.py::"
    "test_network_and_io_failures_are_the_hosts_and_not_kept",
    "4 non-UTF-8 name in an export": "tests/provision/test_artifacts.py::"
    "test_a_name_that_is_not_utf8_is_refused_and_special_files_are_named",
    "4 non-UTF-8 name in a declared input": "tests/lab/test_exports_cache_faults.py::"
    "test_an_input_file_name_that_is_not_utf8_is_hashed_by_its_bytes",
    "4 read-only HOME, no HARNESS_CACHE_DIR": "tests/qnn/test_host.py::"
    "test_an_unwritable_cache_folder_is_a_clear_unavailable_not_a_traceback",
    "4 unwritable claim folder": "tests/lab/test_lab_locks.py::test_an_unwritable_claim_folder_is_a_usage_error_naming_it",
    "4 hashes.json a folder / disk full": "tests/provision/test_units.py::"
    "test_a_hash_cache_that_cannot_be_saved_costs_only_rehashing",
    "5 history locked by another process": "tests/report/test_report_history.py::"
    "test_a_history_locked_by_another_process_is_busy_not_damaged",
    "6 stop: no device-less check for a device never started": "tests/lab/test_lab_scheduler.py::"
    "test_a_stop_writes_no_device_less_check_for_a_device_it_came_before",
    "6 stop: no retry once stopped": "tests/transport/test_retry_stop.py::test_a_retry_is_not_tried_once_the_stop_is_set",
    "7 placeholders with a format spec (each key)": "tests/lab/test_exports_plan.py::"
    "test_bad_exports_are_plan_errors_naming_the_key",
    "8 unreadable build string still smoke-loaded": "tests/provision/test_preflight.py::"
    "test_a_binary_whose_build_string_cannot_be_read_is_still_smoke_loaded",
    "9 damaged catalogue: readers' CLIs": "tests/catalogue/test_catalogue.py::"
    "test_a_damaged_catalogue_is_a_clear_error_of_the_readers_clis",
    "9 catalogue regexes bounded": "tests/catalogue/test_catalogue.py::"
    "test_a_line_is_read_up_to_the_cap_so_the_readers_stay_finite",
    "9 failed debug run shows its RuntimeError": "tests/checks/test_localize_damaged.py::"
    "test_a_failed_run_shows_its_runtime_error_before_qnns_teardown",
    "9 concurrent runs of one export key build once": "tests/lab/test_exports_cache_faults.py::"
    "test_concurrent_runs_of_one_key_build_it_once",
    "9 'must be an integer'": "tests/lab/test_lab_plan.py",
    "found: venv through a symlinked path": "tests/virtual_lab/test_adbd.py::"
    "test_sandbox_runs_an_interpreter_reached_through_a_symlinked_venv",
    "found: exit 127 named runner-not-found": "tests/catalogue/test_catalogue.py::"
    "test_an_exit_127_is_named_as_the_runner_or_its_interpreter_not_found",
    "found: example plan's inputs": "tests/lab/test_exports_plan.py::"
    "test_the_example_plans_inputs_name_every_file_its_exporter_imports_from_beside_it",
    "found: HARNESS_SHARED_DIR": "tests/house/test_shared_dir.py",
    "found: drop mid-push recovers (was flaky)": "tests/virtual_lab/test_faults.py::"
    "test_drop_mid_push_leaves_partial_file_then_recovers",
    "found: adb server connects bounded per server": "tests/transport/test_adb_server_gate.py::"
    "test_connects_to_one_server_are_bounded_per_server",
    "found: a dead adb server restarted once, said": "tests/transport/test_adb_server_gate.py::"
    "test_a_server_that_died_is_started_again_once_and_said",
}


@dataclass
class Case:
    row: str
    ok: bool
    rc: int | None
    tracebacks: int
    said: str


def _run(argv: list[str], *, stdout=subprocess.PIPE, timeout: float = 120, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=timeout, env=env or ENV,
                          cwd=str(REPO))


def _localize(row: str, folder: Path, want_in_reason: str = "") -> Case:
    try:
        done = _run([sys.executable, "-m", "harness.checks.localize", str(folder), "--json"], timeout=120)
    except subprocess.TimeoutExpired:
        return Case(row, False, None, 0, "no answer within 120 s (a hang)")
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        return Case(row, False, done.returncode, done.stderr.count("Traceback"), f"--json not JSON: {done.stdout[:200]!r}")
    ok = done.returncode == 2 and answer.get("outcome") == "undecidable" and want_in_reason in answer.get("reason", "")
    return Case(row, ok, done.returncode, (done.stdout + done.stderr).count("Traceback"),
                str(answer.get("reason", ""))[:160])


def _debug_build(folder: Path, encodings: object) -> Path:
    folder.mkdir(parents=True)
    for name in ("etdump.etdp", "debug_output.bin", "etrecord.bin"):
        (folder / name).write_bytes(os.urandom(256))
    if encodings is not None:
        text = encodings if isinstance(encodings, str) else json.dumps(encodings)
        (folder / "qnn_encodings.json").write_text(text)
    return folder


def cli_cases(tmp: Path) -> list[Case]:
    cases = [_localize("1 random etdump.etdp, good encodings", _debug_build(tmp / "r1a", {"format": "16a8w",
                                                                                           "nodes": [GOOD_NODE]}))]
    for i, (nodes, said) in enumerate([(["a", 1, None], "not an object"),
                                       ([{**GOOD_NODE, "quant": {**GOOD_QUANT, "scale": "0.1"}}], "scale"),
                                       ([{**GOOD_NODE, "axis_order": 7}], "axis_order"),
                                       ([{**GOOD_NODE, "shape": ["abc"]}], "shape")]):
        cases.append(_localize(f"1 encodings of the wrong types ({said})",
                               _debug_build(tmp / f"r1b{i}", {"format": "16a8w", "nodes": nodes}), said))
    deep = '{"format": "16a8w", "nodes": ' + "[" * 200_000 + "]" * 200_000 + "}"
    cases.append(_localize("1 encodings nested 200 000 deep", _debug_build(tmp / "r1c", deep), "nested"))
    fifo = _debug_build(tmp / "r2", None)
    os.mkfifo(fifo / "qnn_encodings.json")
    cases.append(_localize("2 qnn_encodings.json a FIFO", fifo, "qnn_encodings.json"))

    inv = tmp / "devices.yaml"
    inv.write_text(yaml.safe_dump({"devices": [{"name": f"d{i}", "transport": "local", "soc": "SM8650", "htp": "emulator",
                                                "work_dir": str(tmp / f"w{i}")} for i in range(50)]}))
    devices = [sys.executable, "-m", "harness.cli", "--file", str(inv), "devices"]
    with open("/dev/full", "w") as full:
        done = _run(devices, stdout=full)
    cases.append(Case("4 `harness devices > /dev/full`", done.returncode == 1 and "No space left" in done.stderr,
                      done.returncode, done.stderr.count("Traceback"), done.stderr.strip()[:160]))
    pipe = subprocess.run(" ".join(f"'{a}'" for a in devices) + " | head -1 >/dev/null; echo ${PIPESTATUS[0]}",
                          shell=True, executable="/bin/bash", capture_output=True, text=True, env=ENV, cwd=str(REPO))
    rc = int(pipe.stdout.strip() or -1)
    cases.append(Case("4 `harness devices | head -1`", rc in (0, 1) and "Traceback" not in pipe.stderr, rc,
                      pipe.stderr.count("Traceback"), pipe.stderr.strip()[:160] or "(nothing on stderr)"))

    plan_dir = tmp / "r7"
    plan_dir.mkdir()
    (plan_dir / "recipe.txt").write_text("recipe 1\n")
    for spec in ("{soc:x}", "{soc!z}", "{soc:>10000000000}"):
        plan = {"name": "export-night", "suites": [{"name": "executorch_qnn", "models": ["tiny"]}],
                "options": {"runtime_dir": str(plan_dir)},
                "exports": {"builds": [{"model": "tiny", "command": ["python3", "x.py", "--out", "{out}", spec],
                                        "targets": ["SM8650"], "formats": ["16a4w"], "inputs": ["recipe.txt"]}]}}
        (plan_dir / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
        done = _run([sys.executable, "-m", "harness.cli", "--file", str(inv), "export", "--plan",
                     str(plan_dir / "plan.yaml"), "--out", str(plan_dir / "out")])
        cases.append(Case(f"7 plan placeholder {spec}", done.returncode == 4 and spec in done.stderr, done.returncode,
                          (done.stdout + done.stderr).count("Traceback"), done.stderr.strip().splitlines()[-1][:160]
                          if done.stderr.strip() else ""))
    return cases


def test_cases(tmp: Path) -> list[Case]:
    junit = tmp / "rows.xml"
    nodes = sorted(set(TESTS.values()))
    done = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *nodes],
                timeout=1800)
    results: dict[str, list[tuple[bool, str]]] = {}
    if junit.exists():
        for tc in ET.parse(junit).getroot().iter("testcase"):
            f = tc.get("file") or tc.get("classname", "").replace(".", "/") + ".py"
            name = tc.get("name", "").split("[")[0]
            bad = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
            skipped = tc.find("skipped")
            said = "skipped: " + (skipped.get("message") or "")[:120] if skipped is not None else (
                (bad.get("message") or "")[:160] if bad is not None else "passed")
            for key in (f"{f}::{name}", f):
                results.setdefault(key, []).append((bad is None and skipped is None, said))
    out = []
    for row, node in TESTS.items():
        got = results.get(node, [])
        ok = bool(got) and all(g[0] for g in got)
        said = f"{len(got)} case(s): " + ("passed" if ok else "; ".join(s for g, s in got if not g) or "not run")
        out.append(Case(row, ok, None, 0, said))
    if not junit.exists():
        out.append(Case("pytest", False, done.returncode, done.stderr.count("Traceback"), done.stderr[-300:]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-tests", action="store_true", help="only the CLI cases")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="probe44-") as d:
        cases = cli_cases(Path(d))
        if not args.no_tests:
            cases += test_cases(Path(d))
    for c in cases:
        print(f"{'held/clear' if c.ok else 'NOT HELD':10} rc={'-' if c.rc is None else c.rc:<4} "
              f"tracebacks={c.tracebacks}  {c.row}: {c.said}")
    tracebacks = sum(c.tracebacks for c in cases)
    exit3 = sum(c.rc == 3 for c in cases)
    print(f"\n{sum(c.ok for c in cases)}/{len(cases)} held or clear; {tracebacks} tracebacks; {exit3} exit 3")
    print("benchmarks of their own: lab_scale.py --devices 1000,10000 --stops 3 --export-checks --suite qwen3 "
          "--no-status; provision.py --only-unchanged; adb_connect_burst.py --devices 128 --rounds 3")
    return 0 if all(c.ok for c in cases) and not tracebacks and not exit3 else 1


if __name__ == "__main__":
    sys.exit(main())
