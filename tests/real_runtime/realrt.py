"""Helpers for the tests over MNN's real llm_demo (../shared/runtimes/mnn-x86_64, built from
MNN's public source for x86_64) and the real SmolLM2 export (../shared/models)."""

from __future__ import annotations

import os
import platform
import signal
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
REAL_RUNTIME = SHARED / "runtimes" / "mnn-x86_64"
REAL_EXPORT = SHARED / "models" / "smollm2-135m-instruct-mnn-npu16"
RUNTIME_FILES = ("llm_demo", "llm_logits_diff", "libMNN.so", "libMNN_Express.so", "libllm.so")

# Build-system files a CMake build folder holds beside the binaries (small, written at test time).
CMAKE_FILES = {"CMakeCache.txt": "CMAKE_BUILD_TYPE:STRING=Release\n", "Makefile": "all:\n\t@true\n",
               "cmake_install.cmake": "# install script\n", "express/Makefile": "all:\n",
               "express/cmake_install.cmake": "# install script\n",
               "CMakeFiles/llm_demo.dir/link.txt": "c++ -o llm_demo\n"}


def real_runtime_or_skip() -> None:
    for path in (REAL_RUNTIME / "llm_demo", REAL_EXPORT / "config.json"):
        if not path.is_file():
            pytest.skip(f"{path} is absent: these tests run MNN's real llm_demo from ../shared")
    if platform.machine() != "x86_64":
        pytest.skip(f"the shared llm_demo is built for x86_64; this host is {platform.machine()}")


def make_build_tree(dst: Path, *, drop: tuple[str, ...] = ()) -> Path:
    """An MNN build folder as a user has it: llm_demo and libMNN.so at the top,
    libMNN_Express.so under express/, CMake files beside them. The binaries are symlinks to
    the shared build (nothing large is copied)."""
    layout = {"llm_demo": "llm_demo", "llm_logits_diff": "llm_logits_diff", "libMNN.so": "libMNN.so",
              "libllm.so": "libllm.so", "express/libMNN_Express.so": "libMNN_Express.so"}
    for rel, name in layout.items():
        if name in drop:
            continue
        p = dst / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.symlink_to(REAL_RUNTIME / name)
    for rel, text in CMAKE_FILES.items():
        p = dst / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return dst


def find_own_process(token: str, timeout: float = 120.0) -> int | None:
    """The pid of the llm_demo this test started: the one whose environment carries `token`
    (host pids are shared with the virtual device's sandbox). Never any other process."""
    needle = f"HARNESS_TEST_TOKEN={token}".encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    env = fh.read().split(b"\0")
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    argv0 = fh.read().split(b"\0")[0]
            except OSError:
                continue
            if needle in env and argv0.endswith(b"llm_demo"):
                return int(entry)
        time.sleep(0.05)
    return None


def signal_own_process_later(token: str, sig: int = signal.SIGSEGV, after_s: float = 1.0) -> threading.Thread:
    """Send `sig` to this test's llm_demo once it has run `after_s` seconds."""

    def work() -> None:
        pid = find_own_process(token)
        if pid is not None:
            time.sleep(after_s)
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    t = threading.Thread(target=work, daemon=True)
    t.start()
    return t
