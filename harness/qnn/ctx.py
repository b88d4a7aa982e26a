"""QNN context binaries read in-process by the real libQnnSystem.so: the target socModel, the
QAIRT build that made it, the context blob version, and each graph's input/output tensors (name,
dims, datatype, quantization encoding). docs/host-qnn.md "Context binaries" has the facts.

The call sequence: QnnSystemInterface_getProviders -> systemContextCreate ->
systemContextGetBinaryInfo(handle, buffer, size, &info, &size) -> copy what is needed out of
QNN's memory -> systemContextFree. The library is loaded by path (ctypes), which needs no
LD_LIBRARY_PATH (the wheel's RPATH finds its libc++), prints nothing, loads in ~11 ms and reads
a binary in ~0.4 ms (benchmarks/qnn_ctx.py); a truncated or corrupt binary is refused by QNN with error 30010 (malformed binary),
measured, not a crash, so no child process is needed.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness.qnn.layouts as L
from harness import soc
from harness.errors import ArtifactError
from harness.qnn.buildid import QNN_ERROR
from harness.qnn.host import HostQnn, find_host_qnn, qairt_version_of

READER = "libQnnSystem"  # how the source is named in compiled IO and CLI output


class ContextBinaryError(ArtifactError):
    """A file QNN's reader refuses (the message names the file and the likely cause)."""


@dataclass(frozen=True)
class QuantEncoding:
    """A tensor's quantization: kind "none" for float/int tensors, else QNN's encoding with its
    scale/offset pairs (one for per-tensor, one per index of `axis` for axis-wise)."""

    kind: str  # "none", "scale_offset", "axis_scale_offset", "bw_scale_offset", "bw_axis_scale_offset", ...
    scale_offset: tuple[tuple[float, int], ...] = ()
    axis: int | None = None
    bitwidth: int | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.kind}
        if self.scale_offset:
            out["scale_offset"] = [{"scale": s, "offset": o} for s, o in self.scale_offset]
        if self.axis is not None:
            out["axis"] = self.axis
        if self.bitwidth is not None:
            out["bitwidth"] = self.bitwidth
        return out


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dims: tuple[int, ...]
    dtype: str  # "QNN_DATATYPE_UFIXED_POINT_16", as QNN's enum names it
    encoding: QuantEncoding
    tensor_type: str = ""  # "APP_WRITE" (an input), "APP_READ" (an output), ...

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "dims": list(self.dims), "dtype": self.dtype, "encoding": self.encoding.to_json(),
                "type": self.tensor_type}


@dataclass(frozen=True)
class GraphInfo:
    name: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "inputs": [t.to_json() for t in self.inputs],
                "outputs": [t.to_json() for t in self.outputs]}


@dataclass(frozen=True)
class BinaryInfo:
    """What QNN's reader says about one context binary."""

    qairt_build: str  # "v2.49.40.260810104044": the QAIRT that compiled it
    soc_model: int | None  # socModel (the soc_id, 57 = SM8650); None before BinaryInfo V3
    dsp_arch: str | None  # "v75", from the HTP context metadata where the binary holds it
    backend_id: int  # 6 = HTP
    core_api: str
    backend_api: str
    context_blob_version: str  # "4.0.4"
    info_version: int  # the QnnSystemContext_BinaryInfo_t version the library returned (3)
    graphs: tuple[GraphInfo, ...]
    size: int  # bytes of the context binary
    reader: str = field(default="", compare=False)  # the libQnnSystem.so (and its System API) that read it

    @property
    def qairt_version(self) -> str:
        return qairt_version_of(self.qairt_build)

    @property
    def soc(self) -> soc.SocInfo | None:
        return soc.lookup_id(self.soc_model) if self.soc_model is not None else None

    @property
    def htp_arch(self) -> str | None:
        """The HTP arch: from the SoC table for socModel (QNN stores the model, not the arch),
        else the arch the HTP metadata names."""
        info = self.soc
        return info.htp_arch if info is not None else self.dsp_arch

    def to_json(self) -> dict[str, object]:
        info = self.soc
        return {"soc_model": self.soc_model, "soc": info.model if info else None, "htp_arch": self.htp_arch,
                "dsp_arch": self.dsp_arch, "qairt_build": self.qairt_build, "qairt_version": self.qairt_version,
                "backend_id": self.backend_id, "core_api": self.core_api, "backend_api": self.backend_api,
                "context_blob_version": self.context_blob_version, "binary_info_version": self.info_version,
                "bytes": self.size, "reader": self.reader, "graphs": [g.to_json() for g in self.graphs]}


class QnnSystemLib:
    """libQnnSystem.so loaded in this process, its System interface resolved."""

    def __init__(self, lib: Path, qairt_build: str | Callable[[], str] = "") -> None:
        self.path = lib
        # The host's QAIRT build, or how to read it: only descriptions (a refusal, a report's
        # reader) need it, and reading it costs a child process (harness.qnn.host).
        self._build = qairt_build
        try:
            handle = ctypes.CDLL(str(lib))
            get_providers = handle.QnnSystemInterface_getProviders
        except (OSError, AttributeError) as exc:
            raise ContextBinaryError(f"{lib}: cannot load QNN's System library ({exc}); reinstall the qnn extra "
                                     "or point --qnn-sdk at a QAIRT SDK") from None
        self._handle = handle  # keeps the library mapped while the function pointers are used
        get_providers.restype = QNN_ERROR
        get_providers.argtypes = [ctypes.POINTER(ctypes.POINTER(ctypes.POINTER(L.SystemInterface))),
                                  ctypes.POINTER(ctypes.c_uint32)]
        providers = ctypes.POINTER(ctypes.POINTER(L.SystemInterface))()
        count = ctypes.c_uint32(0)
        rc = get_providers(ctypes.byref(providers), ctypes.byref(count))
        found = [providers[i].contents for i in range(count.value)] if rc == 0 and providers else []
        usable = [p for p in found if p.systemApiVersion.major == 1 and p.systemContextCreate
                  and p.systemContextGetBinaryInfo and p.systemContextFree]
        if not usable:
            raise ContextBinaryError(f"{lib}: QnnSystemInterface_getProviders gave no System API 1.x provider "
                                     f"(rc {rc}, {count.value} providers); not a QNN System library this reader knows")
        self._iface = usable[0]
        self.api_version = self._iface.systemApiVersion.text()

    @property
    def qairt_build(self) -> str:
        return self._build if isinstance(self._build, str) else self._build()

    def describe(self) -> str:
        """The library, its QAIRT and System API versions (reads the QAIRT build if not yet known)."""
        return f"{self.path} (QAIRT {qairt_version_of(self.qairt_build) or '?'}, System API {self.api_version})"

    def short(self) -> str:
        """The library and its System API version: what each binary read records (no build read)."""
        return f"{self.path} (System API {self.api_version})"

    def read(self, data: bytes, name: str) -> BinaryInfo:
        """Parse one context binary held in `data`; `name` is the file it came from (for errors)."""
        if not data:
            raise ContextBinaryError(f"{name}: empty (0 bytes); copy the context binary again")
        buf = ctypes.create_string_buffer(data, len(data))
        return self._read_at(ctypes.addressof(buf), len(data), name)

    def read_file(self, path: Path, name: str, offset: int = 0, size: int | None = None) -> BinaryInfo:
        """Parse the context binary at `path` (bytes offset..offset+size), mapped rather than read:
        an LLM's binaries are hundreds of MB and QNN reads only their metadata."""
        try:
            with path.open("rb") as fh:
                total = os.fstat(fh.fileno()).st_size
                length = total - offset if size is None else size
                if length <= 0 or offset + length > total:
                    raise ContextBinaryError(f"{name}: empty or cut short ({total} bytes, {length} wanted at "
                                             f"{offset}); copy the context binary again")
                with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY) as mm:
                    view = (ctypes.c_char * length).from_buffer(mm, offset)
                    try:
                        return self._read_at(ctypes.addressof(view), length, name)
                    finally:
                        del view  # the mapping cannot close while ctypes holds it
        except OSError as exc:
            raise ContextBinaryError(f"{name}: cannot read it ({exc.strerror or exc})") from None

    def _read_at(self, address: int, length: int, name: str) -> BinaryInfo:
        sys_ctx = ctypes.c_void_p()
        rc = self._iface.systemContextCreate(ctypes.byref(sys_ctx))
        if rc != 0:
            raise ContextBinaryError(f"{name}: QNN's systemContextCreate failed ({rc}) in {self.path}")
        try:
            info = ctypes.POINTER(L.BinaryInfo)()
            size = ctypes.c_uint64(0)
            rc = self._iface.systemContextGetBinaryInfo(sys_ctx, address, length, ctypes.byref(info), ctypes.byref(size))
            if rc != 0 or not info:
                raise ContextBinaryError(_refusal(name, int(rc), length, self))
            return _binary_info(info.contents, length, self.short(), name)
        finally:
            self._iface.systemContextFree(sys_ctx)


def _refusal(name: str, rc: int, size: int, lib: QnnSystemLib) -> str:
    why = ("QNN says the binary is malformed" if rc == L.MALFORMED_BINARY
           else f"QnnSystemContext_getBinaryInfo error {rc}")
    return (f"{name}: not a context binary QNN's reader accepts ({why}; {size} bytes, read with {lib.describe()}): "
            "a truncated or corrupt copy, a file that is not a QNN context binary, or one compiled by a newer QAIRT "
            "than these libraries; copy it again or re-export")


def _text(raw: bytes | None) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


def _encoding(q: L.QuantizeParams) -> QuantEncoding:
    if q.encodingDefinition != L.DEFINITION_DEFINED:
        return QuantEncoding("none")
    kind = L.ENCODINGS.get(q.quantizationEncoding, f"encoding_{q.quantizationEncoding}")
    u = q.u
    if kind == "scale_offset":
        so = u.scaleOffsetEncoding
        return QuantEncoding(kind, ((float(so.scale), int(so.offset)),))
    if kind == "axis_scale_offset":
        a = u.axisScaleOffsetEncoding
        pairs = tuple((float(a.scaleOffset[i].scale), int(a.scaleOffset[i].offset))
                      for i in range(a.numScaleOffsets)) if a.scaleOffset else ()
        return QuantEncoding(kind, pairs, axis=int(a.axis))
    if kind == "bw_scale_offset":
        b = u.bwScaleOffsetEncoding
        return QuantEncoding(kind, ((float(b.scale), int(b.offset)),), bitwidth=int(b.bitwidth))
    if kind == "bw_axis_scale_offset":
        ba = u.bwAxisScaleOffsetEncoding
        pairs = tuple((float(ba.scales[i]), int(ba.offsets[i]) if ba.offsets else 0)
                      for i in range(ba.numElements)) if ba.scales else ()
        return QuantEncoding(kind, pairs, axis=int(ba.axis), bitwidth=int(ba.bitwidth))
    return QuantEncoding(kind)  # block / expansion / vector: named, their tables not read


def _tensor(t: L.Tensor, where: str) -> TensorInfo:
    if t.version not in (1, 2):
        raise ContextBinaryError(f"{where}: tensor version {t.version} (this reader knows 1 and 2); "
                                 "a QAIRT newer than the reader's layouts")
    v = t.u.v2 if t.version == 2 else t.u.v1
    dims = tuple(int(v.dimensions[i]) for i in range(v.rank)) if v.dimensions else ()
    dtype = "QNN_DATATYPE_" + L.DATATYPES.get(v.dataType, f"0x{v.dataType:04x}")
    return TensorInfo(_text(v.name), dims, dtype, _encoding(v.quantizeParams), L.TENSOR_TYPES.get(v.type, str(v.type)))


def _tensors(arr: Any, count: int, where: str) -> tuple[TensorInfo, ...]:
    return tuple(_tensor(arr[i], where) for i in range(count)) if arr else ()


def _graphs(arr: Any, count: int, where: str) -> Iterator[GraphInfo]:
    for i in range(count):
        g = arr[i]
        if g.version not in (1, 2, 3):
            raise ContextBinaryError(f"{where}: graph info version {g.version} (this reader knows 1 to 3)")
        h = g.u.head
        name = _text(h.graphName)
        yield GraphInfo(name, _tensors(h.graphInputs, h.numGraphInputs, f"{where} graph {name}"),
                        _tensors(h.graphOutputs, h.numGraphOutputs, f"{where} graph {name}"))


def _binary_info(info: L.BinaryInfo, size: int, reader: str, where: str) -> BinaryInfo:
    if info.version not in (1, 2, 3):
        raise ContextBinaryError(f"{where}: binary info version {info.version} (this reader knows 1 to 3)")
    soc_model: int | None = None
    dsp_arch: str | None = None
    if info.version == 3:
        b: Any = info.u.v3
        soc_model = int(b.socModel) or None
        if b.contextMetadata and b.contextMetadataSize >= ctypes.sizeof(L.HtpContextBlobInfo):
            meta = ctypes.cast(b.contextMetadata, ctypes.POINTER(L.HtpContextBlobInfo)).contents
            dsp_arch = soc.normalize_arch(int(meta.dspArch)) if meta.version == 1 else None
    else:
        b = info.u.v1  # V2 is V1 plus platformInfo at the end
    graphs = tuple(_graphs(b.graphs, b.numGraphs, where)) if b.graphs else ()
    return BinaryInfo(_text(b.buildId), soc_model, dsp_arch, int(b.backendId), b.coreApiVersion.text(),
                      b.backendApiVersion.text(), b.contextBlobVersion.text(), int(info.version), graphs, size,
                      reader)


@functools.lru_cache(maxsize=4)
def _system_lib(path: str, host: HostQnn) -> QnnSystemLib:
    # A shared library cannot be unloaded from a process: keep one handle per library file.
    return QnnSystemLib(Path(path), lambda: host.qairt_build)


def system_lib(host: HostQnn | None = None) -> QnnSystemLib:
    """The host's libQnnSystem.so (find_host_qnn when no host is given), loaded once per process."""
    h = host or find_host_qnn()
    return _system_lib(str(h.system_lib.resolve()), h)


def read_context_binary(data: bytes | Path, *, host: HostQnn | None = None, name: str | None = None) -> BinaryInfo:
    """One context binary (its bytes, or a file) read by the host's libQnnSystem.so."""
    lib = system_lib(host)
    if isinstance(data, Path):
        return lib.read_file(data, name or str(data))
    return lib.read(data, name or "<bytes>")
