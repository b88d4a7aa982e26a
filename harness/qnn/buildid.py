"""The QAIRT build id of a QNN backend library, read through QNN's own API.

`QnnInterface_getProviders` (exported by libQnnHtp.so) hands out the backend's interface; its
function table's `backendGetBuildId` returns the build string ("v2.49.40.260810104044"). The
layouts below are the project's own, written from the public header names (docs/host-qnn.md
"Reading the version"), proven on the onnxruntime-qnn 2.5.0 wheel's libQnnHtp.so.

Run as `python -m harness.qnn.buildid LIB` it prints one JSON object and exits 0, or prints the
reason on stderr and exits 1. harness.qnn.host calls it that way, in a child process: loading
libQnnHtp.so prints a banner on file descriptor 1 ("LIBNATIVE: No alternate configuration ...")
that would corrupt a JSON-printing CLI's stdout, and keeps ~50 MB mapped in the harness for good.
The library itself needs no LD_LIBRARY_PATH to load (its RPATH is $ORIGIN and the wheel's
onnxruntime_qnn.libs), so the child is started with the caller's environment.
"""

from __future__ import annotations

import ctypes
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path


class QnnVersion(ctypes.Structure):
    """Qnn_Version_t: three uint32 (QnnTypes.h)."""

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("patch", ctypes.c_uint32)]

    def text(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


class QnnApiVersion(ctypes.Structure):
    """Qnn_ApiVersion_t: the core API version, then the backend API version."""

    _fields_ = [("coreApiVersion", QnnVersion), ("backendApiVersion", QnnVersion)]


QNN_ERROR = ctypes.c_uint64  # Qnn_ErrorHandle_t; QNN_SUCCESS is 0
_GetBuildId = ctypes.CFUNCTYPE(QNN_ERROR, ctypes.POINTER(ctypes.c_char_p))


class _BackendInterface(ctypes.Structure):
    """The head of QnnInterface_t (QnnInterface.h): backendId, providerName, apiVersion, then the
    function table, whose first five entries are propertyHasCapability, backendCreate,
    backendSetConfig, backendGetApiVersion, backendGetBuildId. Only the head is declared: the
    table's later entries differ between API versions and are not read here."""

    _fields_ = [
        ("backendId", ctypes.c_uint32),
        ("providerName", ctypes.c_char_p),
        ("apiVersion", QnnApiVersion),
        ("propertyHasCapability", ctypes.c_void_p),
        ("backendCreate", ctypes.c_void_p),
        ("backendSetConfig", ctypes.c_void_p),
        ("backendGetApiVersion", ctypes.c_void_p),
        ("backendGetBuildId", _GetBuildId),
    ]


@dataclass(frozen=True)
class BackendBuild:
    build_id: str  # "v2.49.40.260810104044"
    backend_id: int  # 6 = HTP
    provider: str  # "HTP_QTI_AISW"
    core_api: str  # "2.38.0"
    backend_api: str  # "5.49.0"


class BuildIdError(Exception):
    """The library could not be loaded or did not answer (the message says which)."""


def read_backend_build(lib: Path) -> BackendBuild:
    """Load `lib` in this process and ask its first interface provider for the build id."""
    try:
        handle = ctypes.CDLL(str(lib))
        get_providers = handle.QnnInterface_getProviders
    except (OSError, AttributeError) as exc:
        raise BuildIdError(f"{lib}: not a loadable QNN backend library ({exc})") from None
    get_providers.restype = QNN_ERROR
    get_providers.argtypes = [ctypes.POINTER(ctypes.POINTER(ctypes.POINTER(_BackendInterface))),
                              ctypes.POINTER(ctypes.c_uint32)]
    providers = ctypes.POINTER(ctypes.POINTER(_BackendInterface))()
    count = ctypes.c_uint32(0)
    rc = get_providers(ctypes.byref(providers), ctypes.byref(count))
    if rc != 0 or count.value == 0 or not providers:
        raise BuildIdError(f"{lib}: QnnInterface_getProviders returned {rc} with {count.value} providers")
    iface = providers[0].contents
    build = ctypes.c_char_p()
    if not iface.backendGetBuildId:
        raise BuildIdError(f"{lib}: its interface has no backendGetBuildId")
    rc = iface.backendGetBuildId(ctypes.byref(build))
    if rc != 0 or not build.value:
        raise BuildIdError(f"{lib}: backendGetBuildId returned {rc}")
    api = iface.apiVersion
    return BackendBuild(build.value.decode("utf-8", "replace"), int(iface.backendId),
                        (iface.providerName or b"").decode("utf-8", "replace"),
                        api.coreApiVersion.text(), api.backendApiVersion.text())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.qnn.buildid LIBQNNHTP_SO", file=sys.stderr)
        return 2
    try:
        found = read_backend_build(Path(args[0]))
    except BuildIdError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    sys.stdout.flush()
    # A line of its own after the library's banner: the parent takes the last line.
    print("\n" + json.dumps(asdict(found)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
