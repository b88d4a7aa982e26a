"""The runtime log scan: the upstream shape/graph error strings plus the team's own
visual-output guards (`GUARD_*`; upstream validates nothing, docs/llm-demo-output.md#error-strings).
A patched runtime prints a guard as one line containing the constant, e.g.
`[Error]: visual output missing deepstack_feature: outputs=1`."""

from __future__ import annotations

import re

from harness.checks.shapes.findings import ShapeKind, shape_finding
from harness.findings import Finding

# The team's visual-output guard strings (printed by a patched runtime, matched as substrings).
GUARD_NO_IMAGE_EMBEDS = "visual output missing image_embeds"
GUARD_NO_DEEPSTACK = "visual output missing deepstack_feature"
GUARD_DEEPSTACK_SHAPE = "deepstack_embeds shape mismatch"
VISUAL_GUARDS = (GUARD_NO_IMAGE_EMBEDS, GUARD_NO_DEEPSTACK, GUARD_DEEPSTACK_SHAPE)

_CODE_HINTS = {
    "1002": "QNN graph finalize failed",
    "1003": "graph IO does not match the compiled graph (tensor count/shape)",
    "6000": "QNN graph execute failed",
    "6004": "graph IO does not match the compiled graph (tensor count/shape)",
}

# (kind, regex, hint); the regexes match the upstream format strings (docs/llm-demo-output.md#error-strings).
_LOG_PATTERNS: tuple[tuple[ShapeKind, re.Pattern[str], str], ...] = tuple(
    (k, re.compile(p), h) for k, p, h in (
        (ShapeKind.BROADCAST, r"Broad cast error, dim1 = (-?\d+), dim2 = (-?\d+)",
         "a binary op got mismatched rows; for Qwen3-VL with chunking the deepstack tensor keeps "
         "the whole prompt's rows (docs/posdbg.md#known-failure-shapes)"),
        (ShapeKind.COMPUTE_SHAPE, r"Compute Shape Error for (\S+)",
         "shape inference failed inside the graph; see the preceding line"),
        (ShapeKind.COMPUTE_SIZE_CODE, r"code=3 in onForward", "COMPUTE_SIZE_ERROR from StaticModule"),
        (ShapeKind.NO_OUTPUTS, r"\[Error\]: onForward returned no outputs\.?.*",
         "the forward produced nothing; the prompt's result is invalid"),
        (ShapeKind.INVALID_OUTPUT, r"\[Error\]: invalid output tensor from onForward.*",
         "the forward produced an unusable tensor"),
        (ShapeKind.QNN_PLUGIN_SHAPE, r"MNN_QNN: Failed to compute shape for Plugin Op\.",
         "runtime input shapes match no compiled allInputShape: check chunk_limits, "
         "deepstack_embeds [3,1,1], image sizes (check_export_shapes)"),
        (ShapeKind.QNN_RAW_SHAPE, r"MNN_QNN: Failed to find raw shape (.*?)\.?$",
         "a tensor's shape is unknown to the plugin; the QNN export does not match the runtime"),
        (ShapeKind.QNN_PLUGIN_ATTR, r"MNN_QNN: Incorrect Plugin Op, can't find '(\w+)' attr\.",
         "qnn/llm.mnn is not a generate_llm_qnn.py output; regenerate it"),
        (ShapeKind.QNN_EXECUTE, r"MNN_QNN: Failed to execute Plugin Op\.", "the QNN graph failed to run"),
        (ShapeKind.QNN_VALIDATE_BINARY, r"QNN: Failed to validate binary: (-?\d+)",
         "context binaries were built for another soc_id/dsp_arch or QNN SDK"),
        (ShapeKind.GRAPH_IO_MISSING, r"can't find (\d+) (input|output): (\S+)",
         "the graph and the runtime disagree on tensor names (e.g. deepstack_embeds)"),
        (ShapeKind.QNN_MASK, r"Can't find mask from qnn model", "the QNN graph lacks attention_mask"),
        (ShapeKind.QNN_KV, r"QNN: Error: (KV length -?\d+ larger than max size = -?\d+"
                   r"|Remove -?\d+ larger than current = -?\d+)",
         "the prompt exceeds the KV size compiled with --max_history_token"),
        (ShapeKind.QNN_ERROR_CODE, r"Error in file (\S+), line (\d+): error code (\d+)", ""),
        (ShapeKind.MERGED_EMBEDDINGS, r"\[Error\]: (failed to build merged multimodal embeddings"
                              r"|merged multimodal embeddings are not readable).*",
         "image embeddings and image-pad tokens disagree"),
        (ShapeKind.IMAGE_DROPPED, r"Omni Can't open image",
         "the image was not found (paths are relative to the cwd) and was silently dropped"),
        (ShapeKind.IMAGE_TOO_SMALL, r"Qwen-VL smart resize requires height and width >= factor.*",
         "<hw> or the image is smaller than the resize factor"),
        (ShapeKind.VISUAL_GUARD, "(" + "|".join(re.escape(g) for g in VISUAL_GUARDS) + r").*",
         "the visual model's outputs do not feed the LLM correctly (e.g. QNN visual without "
         "deepstack_feature); see check_export_shapes"),
    )
)


def scan_log_for_shape_errors(text: str, *, source: str = "log") -> list[Finding]:
    """Every shape/graph error line in a runtime log (stdout or logcat), in order."""
    findings: list[Finding] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        for kind, pattern, hint in _LOG_PATTERNS:
            m = pattern.search(line)
            if not m:
                continue
            if kind == "qnn_error_code":
                code = m.group(3)
                hint = (_CODE_HINTS.get(code, "a QNN API call failed") +
                        "; CALL_QNN does not abort, so later output is unreliable")
            findings.append(shape_finding(kind, source, m.group(0).strip()[:160], None, None, hint,
                                          line_no=line_no))
            break
    return findings


__all__ = ["GUARD_DEEPSTACK_SHAPE", "GUARD_NO_DEEPSTACK", "GUARD_NO_IMAGE_EMBEDS", "VISUAL_GUARDS",
           "scan_log_for_shape_errors"]
