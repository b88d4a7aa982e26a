"""A small exporter command for the export stage's tests (cache, stop, parallel mechanics).

usage: python fake_exporter.py --soc SOC --soc-id N --arch vNN --format F --out DIR
What it does is chosen per build by $FAKE_EXPORT_MODES ("sa8295-16a4w=qnn-v68,sm8650-8a8w=segv";
default `ok`); every start appends "<soc>-<format>" to $FAKE_EXPORT_COUNTER when set.
Modes: ok (an ExecuTorch-shaped export), qnn-v68 (QNN's v68 op-validation lines, exit 1),
segv / sigkill / sigterm (the process kills itself with that signal), nospace (ENOSPC), random-pte
(an invalid program), traceback, missing-module, empty (exit 0, nothing written), wrong-target (built for
another soc_id), tree (starts a child and a
grandchild in a session of its own, writes their pids to $FAKE_EXPORT_PIDS.<build> and half an export, then sleeps: stop tests),
daemon (exit 0, a setsid() helper left running),
sleep (sleeps: timeout tests), slow (half a second, its times in $FAKE_EXPORT_TIMES).
With --debug-program it is "<soc>-<format>-debug" and `ok` writes a debug build's four files
(docs/localize.md#files) instead; `no-encodings` leaves qnn_encodings.json out.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

QNN_V68 = """[INFO] [Qnn ExecuTorch]: create QNN Logger with log_level 2
[ERROR] [Qnn ExecuTorch]:  <E> [4294967295] has incorrect Value 68, expected >= 73.
[ERROR] [Qnn ExecuTorch]:  <E> QnnBackend_validateOpConfig failed 3110
[ERROR] [Qnn ExecuTorch]:  <E> Failed to validate op aten_native_layer_norm_default with error 0xc26
[WARNING] [Qnn ExecuTorch]: Qnn Backend op validation failed with error: 3110
[ERROR] [Qnn ExecuTorch]:  <E> [4294967295] has incorrect Value 68, expected >= 73.
[ERROR] [Qnn ExecuTorch]:  <E> QnnBackend_validateOpConfig failed 3110
[ERROR] [Qnn ExecuTorch]:  <E> Failed to validate op aten_matmul_default_1 with error 0xc26
[ERROR] [Qnn ExecuTorch]: Failed to finalize Qnn Graph with error: 1002
Traceback (most recent call last):
  File "lower.py", line 1, in <module>
AssertionError: Failed to generate Qnn context binary.
"""


def write_export(out: Path, soc: str, soc_id: int, arch: str, fmt: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    # The virtual lab's real program for the SoC where the host's QNN built it (the harness reads
    # its delegates and target), else a stand-in header the harness does not read without QNN.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from virtual_lab.exports.executorch import real_program

    real = real_program(soc_id)
    (out / "model.pte").write_bytes(real.read_bytes() if real is not None else
                                    struct.pack("<I", 8) + b"ET12" + b"QnnBackend" + f"{soc}-{fmt}".encode() * 64)
    (out / "tokenizer.json").write_text('{"model": {"type": "BPE", "vocab": {}}}')
    (out / "export_args.json").write_text(json.dumps({"soc_id": soc_id, "dsp_arch": arch, "format": fmt}))


DEBUG_FILES = ("debug.pte", "etrecord.bin", "debug_inputs.npz", "qnn_encodings.json")


def write_debug_build(out: Path, build: str, files: tuple[str, ...] = DEBUG_FILES) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in files:
        (out / name).write_text(f"{build} {name}\n")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--soc", required=True)
    ap.add_argument("--soc-id", type=int, required=True)
    ap.add_argument("--arch", required=True)
    ap.add_argument("--format", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--debug-program", action="store_true")
    args = ap.parse_args()
    build = f"{args.soc.lower()}-{args.format}" + ("-debug" if args.debug_program else "")
    if os.environ.get("FAKE_EXPORT_COUNTER"):
        with open(os.environ["FAKE_EXPORT_COUNTER"], "a") as f:
            f.write(build + "\n")
    modes = dict(m.split("=", 1) for m in os.environ.get("FAKE_EXPORT_MODES", "").split(",") if "=" in m)
    mode = modes.get(build, "ok")
    print(f"fake exporter: {build} mode {mode}", flush=True)
    if mode == "ok" and args.debug_program:
        write_debug_build(args.out, build)
    elif mode == "no-encodings":
        write_debug_build(args.out, build, DEBUG_FILES[:3])
    elif mode == "ok":
        write_export(args.out, args.soc, args.soc_id, args.arch, args.format)
    elif mode == "qnn-v68":
        sys.stdout.write(QNN_V68)
        return 1
    elif mode in ("segv", "sigkill"):
        print("building the context binary ...", flush=True)
        os.kill(os.getpid(), signal.SIGSEGV if mode == "segv" else signal.SIGKILL)
    elif mode == "nospace":  # the host's disk filled while writing
        raise OSError(28, "No space left on device", str(args.out / "model.pte"))
    elif mode == "sigterm":  # a CI cancel: SIGTERM from outside the harness
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    elif mode == "traceback":
        raise ValueError("the recipe names a layer the model does not have")
    elif mode == "missing-module":
        print("ModuleNotFoundError: No module named 'executorch'", file=sys.stderr)
        return 1
    elif mode == "random-pte":  # exit 0, but the program is random bytes
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "model.pte").write_bytes(os.urandom(2048))
        (args.out / "tokenizer.json").write_text("{}")
    elif mode == "wrong-target":
        write_export(args.out, args.soc, 69, "v79", args.format)
    elif mode == "tree":
        (args.out / "half.pte").write_bytes(b"partial")
        child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                                  "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True); "
                                  "print(p.pid, flush=True); time.sleep(600)"], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        pids = Path(f"{os.environ['FAKE_EXPORT_PIDS']}.{build}")
        tmp = Path(f"{pids}.tmp")
        tmp.write_text(f"{os.getpid()} {child.pid} {grandchild}\n")
        tmp.rename(pids)
        time.sleep(600)
    elif mode == "daemon":  # exit 0 with a setsid() helper left behind (out of the group), its pid written
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        Path(f"{os.environ['FAKE_EXPORT_PIDS']}.{build}").write_text(f"{helper.pid}\n")
        write_export(args.out, args.soc, args.soc_id, args.arch, args.format)
    elif mode == "sleep":
        time.sleep(600)
    elif mode == "slow":  # half a second of work, its start and end in $FAKE_EXPORT_TIMES
        t0 = time.time()
        time.sleep(0.5)
        with open(os.environ["FAKE_EXPORT_TIMES"], "a") as f:
            f.write(f"{t0} {time.time()}\n")
        write_export(args.out, args.soc, args.soc_id, args.arch, args.format)
    return 0


if __name__ == "__main__":
    sys.exit(main())
