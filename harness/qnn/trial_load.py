"""Does this QAIRT load that context binary? Asked of QNN itself: the backend library's
`backendCreate`, then `contextCreateFromBinary` on each binary (a file, or each QnnBackend
delegate of an ExecuTorch .pte), then `contextFree`. On the x86 libraries that is the HTP
emulator: it answers the QAIRT axis (a binary from a newer QAIRT: `Using newer context binary on
old SDK`, err 5000), not the SoC one (the emulator loads any SoC's binary; docs/qnn-compat.md).

Run as `python -m harness.qnn.trial_load LIBQNNHTP_SO FILE...`, one child process per library
(two QAIRT releases' libraries never share a process); it prints one JSON line per binary after
QNN's own log lines, and exits 0 when it could ask, 1 when the library would not answer. The
function table's layout is the project's own, from the public QnnInterface.h names (buildid.py).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.qnn.buildid import QNN_ERROR, QnnApiVersion

_P = ctypes.c_void_p
# QnnInterface_t's function table, in QnnInterface.h's order, up to contextFree.
_TABLE = ("propertyHasCapability", "backendCreate", "backendSetConfig", "backendGetApiVersion", "backendGetBuildId",
          "backendRegisterOpPackage", "backendGetSupportedOperations", "backendValidateOpConfig", "backendFree",
          "contextCreate", "contextSetConfig", "contextGetBinarySize", "contextGetBinary", "contextCreateFromBinary",
          "contextFree")
_BackendCreate = ctypes.CFUNCTYPE(QNN_ERROR, _P, _P, ctypes.POINTER(_P))
_CreateFromBinary = ctypes.CFUNCTYPE(QNN_ERROR, _P, _P, _P, _P, ctypes.c_uint64, ctypes.POINTER(_P), _P)
_ContextFree = ctypes.CFUNCTYPE(QNN_ERROR, _P, _P)
MARK = "@@trial "  # the prefix of the child's result lines, apart from QNN's log


class _Interface(ctypes.Structure):
    _fields_ = [("backendId", ctypes.c_uint32), ("providerName", ctypes.c_char_p),
                ("apiVersion", QnnApiVersion), *[(name, _P) for name in _TABLE]]


class TrialLoadError(Exception):
    """The library did not load or did not answer (the message says which)."""


def _interface(lib: Path) -> _Interface:
    try:
        get = ctypes.CDLL(str(lib)).QnnInterface_getProviders
    except (OSError, AttributeError) as exc:
        raise TrialLoadError(f"{lib}: not a loadable QNN backend library ({exc})") from None
    get.restype = QNN_ERROR
    get.argtypes = [ctypes.POINTER(ctypes.POINTER(ctypes.POINTER(_Interface))), ctypes.POINTER(ctypes.c_uint32)]
    providers, count = ctypes.POINTER(ctypes.POINTER(_Interface))(), ctypes.c_uint32(0)
    if get(ctypes.byref(providers), ctypes.byref(count)) != 0 or count.value == 0:
        raise TrialLoadError(f"{lib}: QnnInterface_getProviders gave no provider")
    interface: _Interface = providers[0].contents
    return interface


def binaries_of(path: Path) -> list[tuple[str, bytes]]:
    """(name, bytes) of each context binary a file holds: itself, or a program's QNN delegates."""
    from harness.qnn.pte import context_binaries, is_pte

    if is_pte(path):
        return [(f"{path}#{d.method}[{d.index}]", data) for d, data in context_binaries(path)]
    return [(str(path), path.read_bytes())]


def trial_load(lib: Path, files: list[Path]) -> None:
    """Print MARK + {"name", "rc"} for each binary of `files`, rc 0 meaning QNN loaded it."""
    iface = _interface(lib)
    backend = _P()
    rc = _BackendCreate(iface.backendCreate)(None, None, ctypes.byref(backend))
    if rc != 0:
        raise TrialLoadError(f"{lib}: backendCreate returned {rc}")
    for path in files:
        for name, data in binaries_of(path):
            buf = ctypes.create_string_buffer(data, len(data))
            ctx = _P()
            sys.stdout.flush()
            rc = _CreateFromBinary(iface.contextCreateFromBinary)(backend, None, None, ctypes.cast(buf, _P),
                                                                   len(data), ctypes.byref(ctx), None)
            if rc == 0:
                _ContextFree(iface.contextFree)(ctx, None)
            # A line of its own after whatever QNN printed for this binary.
            print("\n" + MARK + json.dumps({"name": name, "rc": int(rc)}), flush=True)


def trial(lib: Path, files: Sequence[Path], timeout: float = 600.0) -> dict[str, tuple[int, str]]:
    """binary name -> (contextCreateFromBinary's answer, QNN's own lines before it) on `lib`, asked
    in a child process (this module's main). TrialLoadError when the child did not answer."""
    env = {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(filter(None, [str(lib.parent),
                                                                          os.environ.get("LD_LIBRARY_PATH", "")]))}
    try:
        proc = subprocess.run([sys.executable, "-m", "harness.qnn.trial_load", str(lib), *map(str, files)],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise TrialLoadError(f"{lib}: the trial load took over {timeout:.0f} s") from None
    found: dict[str, tuple[int, str]] = {}
    said: list[str] = []
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            row = json.loads(line[len(MARK):])
            found[str(row["name"])] = (int(row["rc"]), "; ".join(said[-3:]))
            said = []
        elif line.strip().startswith("<E>"):
            said.append(line.strip())
    if proc.returncode != 0 or not found:
        raise TrialLoadError(f"{lib}: the trial load did not answer (exit {proc.returncode}): "
                             f"{(proc.stderr or proc.stdout).strip()[-400:]}")
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m harness.qnn.trial_load LIBQNNHTP_SO FILE...", file=sys.stderr)
        return 2
    try:
        trial_load(Path(args[0]), [Path(a) for a in args[1:]])
    except TrialLoadError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
