"""Harness runner overhead on the real engine: the same prompt file through LlmDemoRunner on a
virtual device (real adb server, emulated adbd, sandboxed shell) vs the host runtime
(`python -m harness.hostrt.llm_demo`) run directly. Prints the median time ratio (target <= 1.10).

    python benchmarks/runtime_overhead.py [--runs 5] [--max-new-tokens 32]
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    args = parser.parse_args()
    if not EXPORT.is_dir():
        print(f"skip: {EXPORT} is absent")
        return 0
    try:
        import MNN  # noqa: F401
    except ImportError:
        print("skip: the `mnn` extra is not installed (pip install 'harness[mnn]')")
        return 0
    from harness.provision import provision_model, provision_runtime
    from harness.runners.llm_demo import LlmDemoRunner
    from harness.runners.overlay import Overlay
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
