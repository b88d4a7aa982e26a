"""Cost of the host's QNN (harness.qnn), printed as a report; run by hand:

    python benchmarks/qnn_ctx.py [--runs N]

Rows: finding the host's QAIRT libraries cold (the build-id child process) and warm; loading
libQnnSystem.so in-process; reading each context binary of ../shared/models/et-qnn-host/ctx and
each .pte's delegates; an export's whole target read as provisioning does it. Median of N runs.
Needs the qnn extra and ../shared.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.qnn import QnnSystemLib, context_binaries, read_context_binary  # noqa: E402
from harness.qnn import host as qnn_host  # noqa: E402
from harness.qnn.compiled_io import read_binaries_target  # noqa: E402
from tests.shared import SHARED  # noqa: E402

MATERIAL = SHARED / "models" / "et-qnn-host"


def median_s(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _read_pte(pte: Path, host: qnn_host.HostQnn) -> list[object]:
    return [read_context_binary(raw, host=host) for _, raw in context_binaries(pte)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if not MATERIAL.is_dir():
        print(f"{MATERIAL} is absent", file=sys.stderr)
        return 1
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        def cold() -> object:
            qnn_host._read_cached.cache_clear()
            return qnn_host.find_host_qnn(environ={}, cache_dir=Path(tmp) / "c")
        rows.append(("find_host_qnn, cold (layout + build-id child)", median_s(cold, args.runs)))
        host = qnn_host.find_host_qnn(environ={}, cache_dir=Path(tmp) / "c")
        rows.append(("find_host_qnn, warm", median_s(lambda: qnn_host.find_host_qnn(environ={}, cache_dir=Path(tmp) / "c"),
                                                      args.runs)))
        rows.append(("load libQnnSystem.so + getProviders", median_s(lambda: QnnSystemLib(host.system_lib), args.runs)))
        for b in sorted((MATERIAL / "ctx").glob("*.bin")):
            rows.append((f"read {b.name} ({b.stat().st_size // 1024} KiB)",
                         median_s(functools.partial(read_context_binary, b, host=host), args.runs)))
        for p in sorted(MATERIAL.glob("*/*.pte")):
            rows.append((f"find + read the delegates of {p.parent.name}/{p.name}",
                         median_s(functools.partial(_read_pte, p, host), args.runs)))
        export = Path(tmp) / "export"
        export.mkdir()
        shutil.copy(MATERIAL / "llm" / "kv-16a8w-sm8650.pte", export / "model.pte")
        rows.append(("provisioning's target read of a KV export (2 delegates)",
                     median_s(lambda: read_binaries_target(export, host_qnn=host), args.runs)))
    width = max(len(r) for r, _ in rows)
    for name, s in rows:
        print(f"{name:<{width}}  {s * 1000:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
