"""When labgrid's gRPC client cannot be imported, the error says what happened and how to
repair it: a protobuf that no longer fits the generated code (the real VersionError text of
google.protobuf), a grpcio older than its generated code, or labgrid not installed. The
import failure is simulated with a finder placed before the real ones."""

from __future__ import annotations

import importlib.abc
import sys

import pytest

from harness.lab.labgrid import Coordinators, LabgridError, import_labgrid_client

CLIENT = ("labgrid", "labgrid.remote", "labgrid.remote.client")


def _failing_import(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    class Broken(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name in CLIENT:
                raise exc
            return None

    for name in CLIENT:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(sys, "meta_path", [Broken(), *sys.meta_path])


def _real_version_error() -> Exception:
    rv = pytest.importorskip("google.protobuf.runtime_version", reason="protobuf < 5 has no runtime version check")
    try:  # generated code newer than the installed runtime: what a downgraded protobuf meets
        rv.ValidateProtobufRuntimeVersion(rv.DOMAIN, 99, 1, 0, "", "labgrid-coordinator.proto")
    except rv.VersionError as exc:
        return exc
    raise AssertionError("the protobuf runtime accepted gencode 99.1.0")


def test_a_protobuf_mismatch_says_what_happened_and_how_to_repair_it(monkeypatch):
    _failing_import(monkeypatch, _real_version_error())
    with pytest.raises(LabgridError) as info:
        import_labgrid_client()
    msg = str(info.value)
    from importlib import metadata

    assert f"installed protobuf {metadata.version('protobuf')} does not fit" in msg
    assert "VersionError: Detected incompatible Protobuf Gencode/Runtime versions" in msg
    assert "pip install --upgrade 'protobuf>=99.1.0'" in msg and "harness[labgrid]" in msg
    assert "mnnconvert" in msg and "python -c 'import labgrid.remote.client'" in msg


def test_the_coordinator_session_gives_that_error_too(monkeypatch):
    _failing_import(monkeypatch, _real_version_error())
    with pytest.raises(LabgridError, match="protobuf>=99.1.0"):
        Coordinators().get("127.0.0.1:1")


def test_an_old_grpcio_is_named_with_the_version_its_generated_code_needs(monkeypatch):
    _failing_import(monkeypatch, RuntimeError(
        "The grpc package installed is at version 1.60.0, but the generated code in labgrid_coordinator_pb2_grpc.py "
        "depends on grpcio>=1.64.1. Please upgrade your grpc module to grpcio>=1.64.1"))
    with pytest.raises(LabgridError, match=r"grpcio 1\.60\.0 is older .*--upgrade 'grpcio>=1\.64\.1'"):
        import_labgrid_client()


def test_labgrid_not_installed_and_other_errors(monkeypatch):
    _failing_import(monkeypatch, ModuleNotFoundError("No module named 'labgrid'"))
    with pytest.raises(LabgridError, match=r"labgrid is not installed; install it with `pip install 'harness\[labgrid\]'`"):
        import_labgrid_client()
    _failing_import(monkeypatch, ZeroDivisionError("a bug of its own"))
    with pytest.raises(ZeroDivisionError):  # not ours to explain
        import_labgrid_client()
