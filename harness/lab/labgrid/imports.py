"""Importing labgrid's gRPC client (an optional extra) and saying what went wrong when it
cannot be imported: not installed, or installed over a protobuf (or grpcio) that no longer fits
its generated code, e.g. after another package's installer pinned an older protobuf."""

from __future__ import annotations

import re
import sys
from importlib import metadata

from harness.errors import HarnessError


class LabgridError(HarnessError):
    """The coordinator cannot be used for this claim (down, missing place, bad resources)."""


# What protobuf and gRPC's generated code raise on a version mismatch (VersionError from
# google.protobuf.runtime_version; TypeError "Descriptors cannot be created directly"; an
# ImportError of `runtime_version` from an older protobuf; grpc's own version check).
_PROTOBUF_SIGNS = ("Protobuf Gencode/Runtime", "Descriptors cannot be created directly", "runtime_version",
                   "google.protobuf")
_GRPC_SIGN = re.compile(r"grpc package installed is at version (\d[\w.]*\w).*?depends on (grpcio>=\d[\w.]*\w)", re.S)
_GENCODE = re.compile(r"gencode (\d+\.\d+\.\d+)")


def _installed(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def missing_labgrid() -> LabgridError:
    return LabgridError("devices.yaml names a labgrid coordinator but labgrid is not installed; "
                        "install it with `pip install 'harness[labgrid]'`")


def version_mismatch(exc: BaseException) -> LabgridError | None:
    """The error for an import that failed on a protobuf or grpcio version mismatch, else None."""
    text = f"{type(exc).__name__}: {exc}"
    first = text.splitlines()[0][:300]
    pip = f"{sys.executable} -m pip install"
    if m := _GRPC_SIGN.search(text):
        return LabgridError(
            f"labgrid's gRPC client could not be imported: grpcio {m[1]} is older than its generated code needs "
            f"({m[2]}). Repair: `{pip} --upgrade '{m[2]}'`, or reinstall the extra: `pip install "
            "'harness[labgrid]'`.")
    if type(exc).__name__ != "VersionError" and not any(s in text for s in _PROTOBUF_SIGNS):
        return None
    gencode = _GENCODE.search(text)
    need = f"protobuf>={gencode[1]}" if gencode else "protobuf"
    return LabgridError(
        f"labgrid's gRPC client could not be imported: the installed protobuf {_installed('protobuf')} does not "
        f"fit the generated code of labgrid or grpcio ({first}). Something changed this Python's protobuf after "
        "the harness was installed (MNN's `mnnconvert` console script does: it pip-installs "
        "aliyun-log-python-sdk, which pins an older protobuf; the harness calls MNN's converter in-process and "
        f"never runs that script). Repair: `{pip} --upgrade '{need}'` (or reinstall the extra: `pip install "
        "'harness[labgrid]'`), then check with `python -c 'import labgrid.remote.client'`.")


def import_labgrid_client() -> None:
    """Import labgrid's client; a LabgridError that says what happened and how to repair it."""
    try:
        import labgrid.remote.client  # noqa: F401 - optional extra
    except Exception as exc:   # VersionError and TypeError are no ImportError
        mismatch = version_mismatch(exc)
        if mismatch is not None:
            raise mismatch from None
        if isinstance(exc, ImportError):
            raise missing_labgrid() from None
        raise
