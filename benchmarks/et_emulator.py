"""The harness's run of a PTE on the emulated HTP against the bare runner on the same PTE.

    python benchmarks/et_emulator.py [--pte PTE] [--input X.npy] [--iterations 20] [--repeats 3]

Harness: an `htp: emulator` SM8650 device (local transport), its runtime from
provision/emulator.py, `ExecutorchRunner.forward` (the suite's path: the `pte_runner` child
through the transport's shell, its RESULT line parsed, the output pulled and classified).
Bare: one Python process that loads the same PTE with ExecuTorch's pybindings and calls
forward, with the same environment (the runtime's QAIRT variables) and nothing else.
Both are whole processes, timed from start to exit, interleaved, `--repeats` times each; the
figure is the ratio of the medians (target <= 1.05), with the per-forward medians beside it.
Emulator timings are not device speed: this measures the harness's overhead, not the HTP.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.inventory import parse_inventory  # noqa: E402
from harness.provision import provision_emulator_runtime  # noqa: E402
from harness.runners.executorch import ExecutorchRunner  # noqa: E402
from harness.transport import LocalTransport  # noqa: E402
from tests.shared import SHARED  # noqa: E402

DEFAULT_PTE = SHARED / "models" / "et-qnn-host" / "pte" / "qwen3-16a4w-sm8650.pte"

# The bare runner: the pybindings and nothing of the harness.
BARE = """
import sys, time, json
import numpy as np, torch
from executorch.extension.pybindings import portable_lib
x = torch.from_numpy(np.load(sys.argv[2]))
m = portable_lib._load_for_executorch(sys.argv[1])
t = []
for _ in range(int(sys.argv[3])):
    s = time.perf_counter(); m.forward([x]); t.append(time.perf_counter() - s)
print(json.dumps({"run_s": t}))
"""


def _bare(pte: Path, inp: Path, iterations: int, env: dict[str, str]) -> tuple[float, list[float]]:
    started = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", BARE, str(pte), str(inp), str(iterations)], env=env,
                         capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    return wall, json.loads(res.stdout.strip().splitlines()[-1])["run_s"]


def _harness(runner: ExecutorchRunner, pte: Path, inp: Path, iterations: int, out: Path) -> tuple[float, list[float]]:
    started = time.perf_counter()
    run = runner.forward(str(pte), [str(inp)], local_dir=out, iterations=iterations)
    wall = time.perf_counter() - started
    if not run.ok:
        raise SystemExit(f"the harness's run failed: {run.failure()}")
    return wall, run.run_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pte", type=Path, default=DEFAULT_PTE)
    ap.add_argument("--input", type=Path, default=None, help="default: the PTE's <stem>.input.npy")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    inp = args.input or args.pte.with_name(args.pte.name.removesuffix(".pte") + ".input.npy")
    if not args.pte.is_file() or not inp.is_file():
        print(f"{args.pte} or {inp} is absent: pass --pte and --input", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-et-emu-") as scratch:
        root = Path(scratch)
        inv = parse_inventory({"devices": [{"name": "sm8650-emu", "transport": "local", "soc": "SM8650",
                                            "htp": "emulator", "work_dir": str(root / "work")}]}, root / "devices.yaml")
        transport = LocalTransport(inv.get("sm8650-emu"))
        runtime = provision_emulator_runtime(transport)
        runner = ExecutorchRunner(transport, runtime, str(root / "work" / "et-runs"))
        env = {**os.environ, **dict(runtime.env_extra)}  # the same QAIRT environment for the bare runner
        harness_walls, bare_walls, harness_fw, bare_fw = [], [], [], []
        for i in range(args.repeats):
            w, t = _bare(args.pte, inp, args.iterations, env)
            bare_walls.append(w)
            bare_fw += t
            w, t = _harness(runner, args.pte, inp, args.iterations, root / f"out{i}")
            harness_walls.append(w)
            harness_fw += t
    hw, bw = statistics.median(harness_walls), statistics.median(bare_walls)
    hf, bf = statistics.median(harness_fw), statistics.median(bare_fw)
    print(f"PTE {args.pte.name}, {args.iterations} forwards a process, {args.repeats} processes each (emulator times)")
    print(f"  whole process: harness {hw:.2f} s, bare {bw:.2f} s, ratio {hw / bw:.3f} (target <= 1.05)")
    print(f"  one forward:   harness {hf * 1000:.1f} ms, bare {bf * 1000:.1f} ms, ratio {hf / bf:.3f}")
    print("  walls harness " + ", ".join(f"{x:.2f}" for x in harness_walls) + " | bare "
          + ", ".join(f"{x:.2f}" for x in bare_walls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
