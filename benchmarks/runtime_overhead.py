"""Harness runner overhead on the real engine.

1. MNN's real `llm_demo` (../shared/runtimes/mnn-x86_64, x86_64 build of MNN's public source),
   when present: LlmDemoRunner on the host as a `local` device (runtime and export provisioned,
   run folder staged, output parsed and classified) vs the same binary run directly on the same
   derived config and prompt file. Median of --runs (7) each, interleaved; target <= 1.02.
2. With the `mnn` extra: LlmDemoRunner on a virtual device (real adb server, emulated adbd,
   sandboxed shell) vs the host runtime (`python -m harness.hostrt.llm_demo`) run directly
   (target <= 1.10).

    python benchmarks/runtime_overhead.py [--runs 7] [--max-new-tokens 32]

The machine may be shared with other work: the figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
EXPORT = REPO.parent / "shared" / "models" / "smollm2-135m-instruct-mnn-npu16"
REAL_RUNTIME = REPO.parent / "shared" / "runtimes" / "mnn-x86_64"
PROMPT = "What is the capital of France? Answer briefly."


def host_copy(dst: Path, overlay: dict) -> Path:
    """The export linked into a scratch folder with the same derived config the runner writes."""
    dst.mkdir(parents=True)
    for f in EXPORT.iterdir():
        if f.name != "config.json":
            os.symlink(f, dst / f.name)
    config = json.loads((EXPORT / "config.json").read_text())
    config.update(overlay)
    (dst / "config.json").write_text(json.dumps(config))
    return dst / "config.json"


def real_binary(runs: int, max_new_tokens: int) -> None:
    """Section 1: the real llm_demo through the harness vs run directly."""
    if not (REAL_RUNTIME / "llm_demo").is_file():
        print(f"real llm_demo: skip, {REAL_RUNTIME} is absent")
        return
    from harness.inventory import parse_inventory
    from harness.provision import NullProgress, provision_model, provision_runtime
    from harness.runners import Overlay
    from harness.runners.llm_demo import LlmDemoRunner
    from harness.transport import open_transport

    overlay = Overlay(greedy=True, max_new_tokens=max_new_tokens)
    scratch = Path(tempfile.mkdtemp(prefix="bench-overhead-real-"))
    try:
        config = host_copy(scratch / "host-model", overlay.changes(json.loads((EXPORT / "config.json").read_text())))
        (scratch / "prompt.txt").write_text(PROMPT + "\n")
        inv = parse_inventory({"devices": [{"name": "host", "transport": "local", "work_dir": str(scratch / "work")}]},
                              scratch / "devices.yaml")
        t = open_transport(inv.get("host"))
        runtime = provision_runtime(t, REAL_RUNTIME, need_qnn=False, progress=NullProgress())
        model = provision_model(t, EXPORT, progress=NullProgress())
        runner = LlmDemoRunner(t, runtime, model, logcat="off")
        runner.run([PROMPT], backend="cpu", overlay=overlay)  # warm-up: derived config written, caches warm
        env = {**os.environ, "LD_LIBRARY_PATH": str(REAL_RUNTIME)}
        harness_times, direct_times = [], []
        for i in range(runs):
            started = time.monotonic()
            res = runner.run([PROMPT], backend="cpu", overlay=overlay)
            harness_times.append(time.monotonic() - started)
            assert res.ok and "Paris" in (res.texts[0] or ""), res.to_json()
            started = time.monotonic()
            proc = subprocess.run([str(REAL_RUNTIME / "llm_demo"), str(config), "prompt.txt"], cwd=scratch, env=env,
                                  capture_output=True, text=True)
            direct_times.append(time.monotonic() - started)
            assert proc.returncode == 0 and "Paris" in proc.stdout, proc.stdout + proc.stderr
            print(f"run {i + 1}: harness runner {harness_times[-1]:.3f}s, llm_demo directly {direct_times[-1]:.3f}s")
        runner.cleanup()
        t.close()
        ratio = statistics.median(harness_times) / statistics.median(direct_times)
        print(f"real llm_demo, median of {runs}: harness {statistics.median(harness_times):.3f}s, direct "
              f"{statistics.median(direct_times):.3f}s, ratio {ratio:.3f} (target <= 1.02); fastest-run ratio "
              f"{min(harness_times) / min(direct_times):.3f} (less sensitive to other load on the machine)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    args = parser.parse_args()
    if not EXPORT.is_dir():
        print(f"skip: {EXPORT} is absent")
        return 0
    real_binary(args.runs, args.max_new_tokens)
    try:
        import MNN  # noqa: F401
    except ImportError:
        print("skip: the `mnn` extra is not installed (pip install 'harness[mnn]')")
        return 0
    from harness.provision import provision_model, provision_runtime
    from harness.runners import Overlay
    from harness.runners.llm_demo import LlmDemoRunner
    from harness.transport import open_transport
    from virtual_lab.lab import VirtualLab, default_devices

    overlay = Overlay(greedy=True, max_new_tokens=args.max_new_tokens)
    scratch = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    try:
        config = host_copy(scratch / "host-model", overlay.changes(json.loads((EXPORT / "config.json").read_text())))
        (scratch / "prompt.txt").write_text(PROMPT + "\n")
        with VirtualLab(scratch / "lab", default_devices()[:1]) as lab:
            t = open_transport(lab.inventory.get("oneplus13"))
            runtime = provision_runtime(t, lab.runtime_dir("v79"))
            model = provision_model(t, EXPORT, allow_unknown_target=True)
            runner = LlmDemoRunner(t, runtime, model, logcat="off")
            device_times, host_times = [], []
            for i in range(args.runs):
                started = time.monotonic()
                res = runner.run([PROMPT], backend="cpu", overlay=overlay)
                device_times.append(time.monotonic() - started)
                assert res.ok, res.to_json()
                started = time.monotonic()
                proc = subprocess.run([sys.executable, "-m", "harness.hostrt.llm_demo", str(config), "prompt.txt"],
                                      cwd=scratch, capture_output=True, text=True)
                host_times.append(time.monotonic() - started)
                assert proc.returncode == 0 and "Paris" in proc.stdout, proc.stdout + proc.stderr
                print(f"run {i + 1}: harness on virtual device {device_times[-1]:.2f}s, host direct {host_times[-1]:.2f}s")
            t.close()
        ratio = statistics.median(device_times) / statistics.median(host_times)
        print(f"median harness/host time ratio: {ratio:.3f} (target <= 1.10)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
