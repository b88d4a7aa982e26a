"""ctypes layouts of the QNN System API structs the context-binary reader walks.

The project's own declarations, written from the public header names (QnnTypes.h,
System/QnnSystemContext.h, System/QnnSystemInterface.h, HTP/QnnHtpSystemContext.h; none is
vendored) and proven against the real libQnnSystem.so on ../shared's binaries
(tests/qnn/test_ctx.py; docs/host-qnn.md "Context binaries" lists every fact relied on). Only what
the reader needs is declared; a struct's tail that is never read is left out where the struct is
reached through a pointer (never in an array, where its size sets the stride).
"""

from __future__ import annotations

import ctypes
from typing import Any

from harness.qnn.buildid import QNN_ERROR, QnnVersion

U32 = ctypes.c_uint32
Fields = list[tuple[str, Any]]  # a struct's field list, shared between versions of one struct


class ScaleOffset(ctypes.Structure):
    """Qnn_ScaleOffset_t: float_value = (quantized + offset) * scale."""

    _fields_ = [("scale", ctypes.c_float), ("offset", ctypes.c_int32)]


class AxisScaleOffset(ctypes.Structure):
    """Qnn_AxisScaleOffset_t: one scale/offset per index of `axis`."""

    _fields_ = [("axis", ctypes.c_int32), ("numScaleOffsets", U32), ("scaleOffset", ctypes.POINTER(ScaleOffset))]


class BwScaleOffset(ctypes.Structure):
    """Qnn_BwScaleOffset_t."""

    _fields_ = [("bitwidth", U32), ("scale", ctypes.c_float), ("offset", ctypes.c_int32)]


class BwAxisScaleOffset(ctypes.Structure):
    """Qnn_BwAxisScaleOffset_t: the union's largest member (32 bytes), so it sets the union's size."""

    _fields_ = [("bitwidth", U32), ("axis", ctypes.c_int32), ("numElements", U32),
                ("scales", ctypes.POINTER(ctypes.c_float)), ("offsets", ctypes.POINTER(ctypes.c_int32))]


class _Encodings(ctypes.Union):
    # Also in the header: blockEncoding (two pointers) and two pointer members; none is larger.
    _fields_ = [("scaleOffsetEncoding", ScaleOffset), ("axisScaleOffsetEncoding", AxisScaleOffset),
                ("bwScaleOffsetEncoding", BwScaleOffset), ("bwAxisScaleOffsetEncoding", BwAxisScaleOffset)]


class QuantizeParams(ctypes.Structure):
    """Qnn_QuantizeParams_t: encodingDefinition, quantizationEncoding, the encoding union (40 bytes)."""

    _fields_ = [("encodingDefinition", U32), ("quantizationEncoding", U32), ("u", _Encodings)]


class _SparseParams(ctypes.Structure):
    """Qnn_SparseParams_t: a layout type and a union of two uint32 (hybrid COO)."""

    _fields_ = [("type", U32), ("numSpecifiedElements", U32), ("numSparseDimensions", U32)]


_TENSOR_V1_FIELDS: Fields = [
    ("id", U32), ("name", ctypes.c_char_p), ("type", U32), ("dataFormat", U32), ("dataType", U32),
    ("quantizeParams", QuantizeParams), ("rank", U32), ("dimensions", ctypes.POINTER(U32)), ("memType", U32),
    ("clientBufData", ctypes.c_void_p), ("clientBufSize", U32),  # the clientBuf / memHandle union
]


class TensorV1(ctypes.Structure):
    """Qnn_TensorV1_t."""

    _fields_ = _TENSOR_V1_FIELDS


class TensorV2(ctypes.Structure):
    """Qnn_TensorV2_t: V1's fields, then isDynamicDimensions, sparseParams, isProduced."""

    _fields_ = [*_TENSOR_V1_FIELDS, ("isDynamicDimensions", ctypes.c_void_p), ("sparseParams", _SparseParams),
                ("isProduced", ctypes.c_uint8)]


class _TensorBody(ctypes.Union):
    _fields_ = [("v1", TensorV1), ("v2", TensorV2)]


class Tensor(ctypes.Structure):
    """Qnn_Tensor_t: a version tag and the V1/V2 union; 144 bytes, the stride of graphInputs[]."""

    _fields_ = [("version", U32), ("u", _TensorBody)]


TENSOR_SIZE = 144  # checked at import below: a wrong stride would misread every tensor after the first


_GRAPH_HEAD: Fields = [("graphName", ctypes.c_char_p), ("numGraphInputs", U32), ("graphInputs", ctypes.POINTER(Tensor)),
                       ("numGraphOutputs", U32), ("graphOutputs", ctypes.POINTER(Tensor))]


class GraphInfoHead(ctypes.Structure):
    """The fields QnnSystemContext_GraphInfoV1_t, V2_t and V3_t share at their start."""

    _fields_ = _GRAPH_HEAD


class GraphInfoV3(ctypes.Structure):
    """QnnSystemContext_GraphInfoV3_t (the largest: it sets the size of the GraphInfo_t union)."""

    _fields_ = [*_GRAPH_HEAD, ("numUpdateableTensors", U32), ("updateableTensors", ctypes.POINTER(Tensor)),
                ("graphBlobInfoSize", U32), ("graphBlobInfo", ctypes.c_void_p), ("startOpIndex", U32),
                ("endOpIndex", U32)]


class _GraphBody(ctypes.Union):
    _fields_ = [("head", GraphInfoHead), ("v3", GraphInfoV3)]


class GraphInfo(ctypes.Structure):
    """QnnSystemContext_GraphInfo_t: version (1, 2, 3) and the union; graphs[] has this stride."""

    _fields_ = [("version", U32), ("u", _GraphBody)]


_BINARY_HEAD: Fields = [("backendId", U32), ("buildId", ctypes.c_char_p), ("coreApiVersion", QnnVersion),
                ("backendApiVersion", QnnVersion), ("socVersion", ctypes.c_char_p)]
_BINARY_GRAPHS: Fields = [("numContextTensors", U32), ("contextTensors", ctypes.POINTER(Tensor)), ("numGraphs", U32),
                  ("graphs", ctypes.POINTER(GraphInfo))]


class BinaryInfoV1(ctypes.Structure):
    """QnnSystemContext_BinaryInfoV1_t (V2 adds platformInfo at the end)."""

    _fields_ = [*_BINARY_HEAD, ("hwInfoBlobVersion", QnnVersion), ("contextBlobVersion", QnnVersion),
                ("hwInfoBlobSize", U32), ("hwInfoBlob", ctypes.c_void_p), ("contextBlobSize", ctypes.c_uint64),
                *_BINARY_GRAPHS]


class BinaryInfoV3(ctypes.Structure):
    """QnnSystemContext_BinaryInfoV3_t: no hwInfoBlob; platformInfo, contextMetadata and socModel."""

    _fields_ = [*_BINARY_HEAD, ("contextBlobVersion", QnnVersion), ("contextBlobSize", ctypes.c_uint64),
                *_BINARY_GRAPHS, ("platformInfo", ctypes.c_void_p), ("contextMetadataSize", U32),
                ("contextMetadata", ctypes.c_void_p), ("socModel", U32)]


class _BinaryBody(ctypes.Union):
    _fields_ = [("v1", BinaryInfoV1), ("v3", BinaryInfoV3)]


class BinaryInfo(ctypes.Structure):
    """QnnSystemContext_BinaryInfo_t: version (1, 2, 3) and the union. Reached through a pointer."""

    _fields_ = [("version", U32), ("u", _BinaryBody)]


class HtpContextBlobInfo(ctypes.Structure):
    """QnnHtpSystemContext_ContextBlobInfo_t, what BinaryInfoV3.contextMetadata points at for HTP:
    version 1 holds `dspArch` (75 for a v75 binary)."""

    _fields_ = [("version", U32), ("dspArch", U32)]


SystemContextCreate = ctypes.CFUNCTYPE(QNN_ERROR, ctypes.POINTER(ctypes.c_void_p))
SystemContextGetBinaryInfo = ctypes.CFUNCTYPE(QNN_ERROR, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                              ctypes.POINTER(ctypes.POINTER(BinaryInfo)),
                                              ctypes.POINTER(ctypes.c_uint64))
SystemContextFree = ctypes.CFUNCTYPE(QNN_ERROR, ctypes.c_void_p)


class SystemInterface(ctypes.Structure):
    """QnnSystemInterface_t's head: backendId, providerName, systemApiVersion, then the function
    table starting systemContextCreate, systemContextGetBinaryInfo, systemContextGetMetaData,
    systemContextFree (later entries are not read)."""

    _fields_ = [("backendId", U32), ("providerName", ctypes.c_char_p), ("systemApiVersion", QnnVersion),
                ("systemContextCreate", SystemContextCreate),
                ("systemContextGetBinaryInfo", SystemContextGetBinaryInfo),
                ("systemContextGetMetaData", ctypes.c_void_p), ("systemContextFree", SystemContextFree)]


# Qnn_DataType_t (QnnTypes.h): the low byte is the bit width written in decimal digits.
DATATYPES: dict[int, str] = {
    0x0008: "INT_8", 0x0016: "INT_16", 0x0032: "INT_32", 0x0064: "INT_64",
    0x0108: "UINT_8", 0x0116: "UINT_16", 0x0132: "UINT_32", 0x0164: "UINT_64",
    0x0216: "FLOAT_16", 0x0232: "FLOAT_32", 0x0264: "FLOAT_64",
    0x0304: "SFIXED_POINT_4", 0x0308: "SFIXED_POINT_8", 0x0316: "SFIXED_POINT_16", 0x0332: "SFIXED_POINT_32",
    0x0404: "UFIXED_POINT_4", 0x0408: "UFIXED_POINT_8", 0x0416: "UFIXED_POINT_16", 0x0432: "UFIXED_POINT_32",
    0x0508: "BOOL_8", 0x0608: "STRING", 0x7FFFFFFF: "UNDEFINED",
}
# Qnn_QuantizationEncoding_t
ENCODINGS: dict[int, str] = {0: "scale_offset", 1: "axis_scale_offset", 2: "bw_scale_offset",
                             3: "bw_axis_scale_offset", 4: "block", 5: "blockwise_expansion", 6: "vector",
                             0x7FFFFFFF: "undefined"}
DEFINITION_DEFINED = 1  # Qnn_Definition_t QNN_DEFINITION_DEFINED: the encoding fields are meaningful
# Qnn_TensorType_t
TENSOR_TYPES: dict[int, str] = {0: "APP_WRITE", 1: "APP_READ", 2: "APP_READWRITE", 3: "NATIVE", 4: "STATIC",
                                5: "NULL", 11: "OPTIONAL_APP_WRITE", 12: "OPTIONAL_APP_READ",
                                13: "OPTIONAL_APP_READWRITE"}
MALFORMED_BINARY = 30010  # QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY (QNN_MIN_ERROR_SYSTEM 30000 + 10)

if ctypes.sizeof(Tensor) != TENSOR_SIZE or ctypes.sizeof(QuantizeParams) != 40:
    raise ImportError(f"harness.qnn.layouts: Qnn_Tensor_t is {ctypes.sizeof(Tensor)} bytes here, expected "
                      f"{TENSOR_SIZE}: this platform's C layout differs from x86_64's")
