"""The virtual lab's ExecuTorch `qnn_llama_runner` and `qnn_executor_runner`: ExecuTorch for real.

What the device decides stays the device's: the runner's gflags (an unknown flag prints
`ERROR: unknown command line flag 'x'` and exits 1), the files it is given, and the QNN libraries
found through the binary's rpath ($ORIGIN), LD_LIBRARY_PATH and ADSP_LIBRARY_PATH for the device's
HTP arch (a missing Stub or Skel fails as QNN fails). Then the program runs on ExecuTorch's real
runtime, as the virtual `llm_demo` runs MNN's real engine: the process becomes the harness's host
runner (`qnn_llama_runner`: ExecuTorch's TextLLMRunner, harness.hostrt.executorch;
`qnn_executor_runner`: the runner's contract on the pybindings, harness.hostrt.executorch.executor)
with the host's QAIRT libraries on its loader path, so the QNN part runs on QAIRT's x86 HTP
emulator. Nothing is scripted: no answer, no ETDump and no failure is made up here; a program
ExecuTorch cannot load fails as ExecuTorch fails (docs/virtual-lab.md#executorch).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.hostrt.executorch import LLAMA_FLAGS, FlagError, parse_flags
from harness.hostrt.executorch.executor import EXECUTOR_FLAGS
from harness.hostrt.executorch.executor import MODULE as EXECUTOR_MODULE
from virtual_lab.runtime.devenv import device_facts, missing_qnn_libs, repo_root

LLAMA_MODULE = "harness.hostrt.executorch"
QAIRT_WHEEL = "onnxruntime_qnn"  # the host's QAIRT x86 libraries (docs/host-qnn.md)
EXIT_NO_ENGINE = 2


def _log(where: str, msg: str) -> None:
    # ET_LOG as the real runner prints it: "[file.cpp:123] message" (docs/executorch-runner.md).
    sys.stderr.write(f"[{where}] {msg}\n")
    sys.stderr.flush()


def _check_libs(build: Mapping[str, Any], prog: str) -> bool:
    facts = device_facts()
    rpath = (os.path.dirname(os.path.realpath(prog)),) if build.get("rpath_origin") else ()
    # FastRPC also finds a Skel in the process's cwd (the ExecuTorch workspace pushes it there).
    env = dict(os.environ)
    env["ADSP_LIBRARY_PATH"] = ";".join(filter(None, [env.get("ADSP_LIBRARY_PATH", ""), os.getcwd()]))
    reason = missing_qnn_libs(facts.htp_arch or str(build.get("arch", "")), env, rpath=rpath)
    if reason:
        lib = re.search(r'"([^"]+)"', reason)
        _log("QnnImplementation.cpp:82",
             f"Cannot Open QNN library {lib.group(1) if lib else 'libQnnHtp.so'}, with error: {reason}")
        return False
    return True


def host_engine_env(environ: Mapping[str, str]) -> dict[str, str] | None:
    """The environment the host runner starts with: the host's x86 QAIRT libraries (the wheel's
    folder and its libc++ folder, as harness.qnn.find_host_qnn lays them out) first on the loader
    path in place of the device's Android ones, and this checkout importable. None without them."""
    spec = importlib.util.find_spec(QAIRT_WHEEL)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders or importlib.util.find_spec("executorch") is None:
        return None
    pkg = Path(folders[0])
    env = {k: v for k, v in environ.items() if k not in ("LD_LIBRARY_PATH", "QNN_SDK_ROOT")}
    env["LD_LIBRARY_PATH"] = os.pathsep.join(str(p) for p in (pkg, pkg.parent / f"{QAIRT_WHEEL}.libs") if p.is_dir())
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo_root()), environ.get("PYTHONPATH", "")]))
    return env


def _become(module: str, args: list[str]) -> int:
    """exec the host runner in this process (same pid: the harness's timeout and signals reach it)."""
    env = host_engine_env(os.environ)
    if env is None:
        sys.stderr.write("[Error]: the virtual lab runs ExecuTorch programs on the host's HTP emulator: install "
                         "the qnn extra (pip install 'harness[qnn]': executorch and onnxruntime-qnn)\n")
        return EXIT_NO_ENGINE
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-B", "-m", module, *args], env)
    return 127  # not reached: execve returns only by raising


def llama_main(argv: list[str], build: Mapping[str, Any]) -> int:
    try:
        flags = parse_flags(argv[1:], LLAMA_FLAGS)
    except FlagError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    for path, what in ((flags["model_path"], "model"), (flags["tokenizer_path"], "tokenizer")):
        if not os.path.isfile(path):
            _log("runner.cpp:98", f"Failed to load {what} from {path}: file not found")
            return 1
    if not _check_libs(build, argv[0]):
        _log("QnnBackend.cpp:80", "Failed to initialize QNN backend for kHtpBackend.")
        _log("text_decoder_runner.h:52", "Failed to load method 'forward'. Check available methods in the model.")
        return 1
    return _become(LLAMA_MODULE, argv[1:])


def executor_main(argv: list[str], build: Mapping[str, Any]) -> int:
    try:
        flags = parse_flags(argv[1:], EXECUTOR_FLAGS)
    except FlagError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    if not os.path.isfile(flags["model_path"]):
        _log("qnn_executor_runner.cpp:332", f"Failed to parse model file {flags['model_path']}")
        return 1
    if not _check_libs(build, argv[0]):
        _log("QnnBackend.cpp:80", "Failed to initialize QNN backend for kHtpBackend.")
        return 1
    return _become(EXECUTOR_MODULE, argv[1:])


def main(argv: list[str], build: Mapping[str, Any] | None = None) -> int:
    build = dict(build or {})
    name = os.path.basename(argv[0]) if argv else "qnn_llama_runner"
    if "executor" in name:
        return executor_main(argv, build)
    return llama_main(argv, build)
