"""Where the tests over real QNN find their material: the host's QAIRT libraries (the
onnxruntime-qnn wheel, the `qnn` extra) and ../shared/models/et-qnn-host (context binaries,
PTEs and logs made with ExecuTorch 1.5.1 on QAIRT 2.49.40). Each helper skips with the reason
when its material is absent."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.shared import SHARED

REPO = Path(__file__).resolve().parents[2]


ET_QNN = SHARED / "models" / "et-qnn-host"


def et_qnn_or_skip(*parts: str) -> Path:
    path = ET_QNN.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: this test reads the real QNN material of ../shared/models/et-qnn-host")
    return path


def wheel_or_skip() -> None:
    if importlib.util.find_spec("onnxruntime_qnn") is None:
        pytest.skip("onnxruntime_qnn is not installed (the qnn extra: pip install 'harness[qnn]')")


def emulator_extras_or_skip() -> None:
    """The emulated HTP's two extras: ExecuTorch's pybindings (its QnnBackend) and the QAIRT wheel."""
    for mod, extra in (("executorch.extension.pybindings.portable_lib", "executorch"), ("onnxruntime_qnn", "qnn")):
        try:
            found = importlib.util.find_spec(mod)
        except ModuleNotFoundError:
            found = None
        if found is None:
            pytest.skip(f"the emulated HTP needs the optional `{extra}` extra (pip install 'harness[{extra}]')")


NEWER_CTX = REPO / "fixtures" / "qnn_binaries" / "matmul64-sm8650-qairt2.51.0.bin"  # QAIRT 2.51.0, SM8650


def pte_with_context(src: Path, binary: bytes, out: Path) -> Path:
    """A copy of the program `src` whose (first) QNN delegate carries `binary` in place of its own
    context binary: ExecuTorch's QNN protocol header and the segment's size rewritten, everything
    else byte for byte. A program whose delegate another QAIRT built, without that QAIRT driving
    ExecuTorch (ExecuTorch 1.5.1 lowers only on 2.49, ../shared's README)."""
    import struct

    from harness.qnn import qnn_delegates
    from harness.qnn.pte import _QNN_HEAD, _Flat, _segment_base

    buf = bytearray(src.read_bytes())
    d = qnn_delegates(src)[0]
    assert len(binary) <= d.size, "the new binary must fit in the old one's place"
    flat = _Flat(bytes(buf), str(src))
    program, base = flat.u32(0), _segment_base(flat)
    assert base is not None, "a program whose delegate lives in a segment"
    for seg in flat.vector(program, 4):  # Program.segments: the one that holds the delegate
        start, size = base + flat.scalar(seg, 0, "Q"), flat.scalar(seg, 1, "Q")  # absent fields: 0
        size_at = flat.field(seg, 1)
        if size_at is not None and start < d.offset < start + size:
            pad = d.offset - start
            struct.pack_into("<Q", buf, size_at, pad + len(binary))
            magic, signature, _old = _QNN_HEAD.unpack_from(buf, start)
            _QNN_HEAD.pack_into(buf, start, magic, signature, len(binary))
            buf[d.offset:d.offset + len(binary)] = binary
            out.write_bytes(bytes(buf))
            return out
    raise AssertionError(f"{src}: no segment holds the QNN delegate")


def vlab_real_binaries_or_skip() -> None:
    """The virtual lab writes real context binaries and programs only where the host's QNN can
    build them (virtual_lab.qnn_cache: the `qnn` and `executorch` extras); elsewhere stand-ins."""
    from virtual_lab.qnn_cache import find_builder

    builder, why = find_builder()
    if builder is None:
        pytest.skip(f"the virtual lab writes stand-in context binaries on this host: {why}")
