"""Cost of reading an export's compiled QNN IO (harness.qnn.compiled_io), printed as a report.

    python benchmarks/compiled_io.py [--runs N]

Rows: the real MNN master stub (../shared/models/smollm2-qnn-stub-v79, when present) and a
generated Qwen3-VL export (29 LLM + 1 visual context binaries): cold read (the converter
subprocess dumps each stub), warm read (cached per path/size/mtime), the whole static check,
and the read with the virtual lab's qnn-context-binary-utility stand-in (one process per
binary). Median of N runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.checks.shapes import check_export_shapes  # noqa: E402
from harness.qnn import HOST_QNN_SWITCH, compiled_io  # noqa: E402
from harness.qnn.compiled_io import stub as stub_module  # noqa: E402
from virtual_lab.exports import make_qwen3_vl_export, write_sdk_tool  # noqa: E402

STUB = ROOT / ".." / "shared" / "models" / "smollm2-qnn-stub-v79"


def median_s(fn: Callable[[], object], runs: int, *, cold: bool) -> float:
    times = []
    for _ in range(runs):
        if cold:
            stub_module._dump_cached.cache_clear()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    # The generated export's context binaries are the virtual lab's stand-ins (the host's QNN
    # library would refuse them): these rows measure the stub and the SDK stand-in.
    os.environ.setdefault(HOST_QNN_SWITCH, "off")
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        vl = make_qwen3_vl_export(Path(tmp) / "vl", size_mb=1, sidecar=False).path
        sdk = Path(tmp) / "sdk"
        write_sdk_tool(sdk / "bin" / "x86_64-linux-clang")
        if (STUB / "qnn" / "llm.mnn").is_file():
            rows.append(("real stub smollm2 (32 plugins): cold read",
                         median_s(lambda: compiled_io.read_compiled_io(STUB), args.runs, cold=True)))
            rows.append(("real stub smollm2: warm read (cached)",
                         median_s(lambda: compiled_io.read_compiled_io(STUB), args.runs, cold=False)))
        rows.append(("generated qwen3-vl (llm + visual stubs): cold read",
                     median_s(lambda: compiled_io.read_compiled_io(vl), args.runs, cold=True)))
        rows.append(("generated qwen3-vl: warm read (cached)",
                     median_s(lambda: compiled_io.read_compiled_io(vl), args.runs, cold=False)))
        rows.append(("generated qwen3-vl: check_export_shapes, every config, warm",
                     median_s(lambda: check_export_shapes(vl), args.runs, cold=False)))
        rows.append(("generated qwen3-vl: read with --qnn-sdk (30 binaries), warm stubs",
                     median_s(lambda: compiled_io.read_compiled_io(vl, qnn_sdk=sdk), max(1, args.runs // 2),
                              cold=False)))
    width = max(len(r) for r, _ in rows)
    print(f"{'case':<{width}}  median s ({args.runs} runs)")
    for name, s in rows:
        print(f"{name:<{width}}  {s:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
