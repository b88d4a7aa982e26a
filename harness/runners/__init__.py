"""Runners of a device's engine and what their output means: the runner kinds (base.py), prompt
cases, signatures (the runner's view of the failure catalogue), quant matrix, overlays, summaries. Sub-packages (llm_demo/,
logits_diff/, executorch/) have faces of their own; this face holds the loose modules' names.
This `__init__` is the package's one face; names load on first use (PEP 562), so importing one
name imports only its module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "base": ("RunnerKind",),
    "cases": ("PromptCase", "chunked_image_cases", "default_cases", "write_test_image"),
    "diff_tools": ("TOOL", "TOOL_VL", "pick_tool", "shows_b_images", "without_engine_text"),
    "overlay": ("Overlay", "derived_name"),
    "prompts": ("Image", "Prompt", "render_prompt_file"),
    "quant_matrix": ("QUANT_FORMATS", "plan_matrix", "skip_reason", "weight_sharing_supported"),
    "signatures": ("load_signatures", "logcat_messages"),
    "summary": ("find_summary", "parse_number"),
    "vl_chunks": ("POSDBG_ENV", "ROLES", "ChunkedRun", "Chunking", "RoleVerdict", "chunkings", "image_grids", "pads",
                  "positions_verdict", "run_chunkings", "shapes_verdict"),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.runners.base import RunnerKind as RunnerKind
    from harness.runners.cases import PromptCase as PromptCase
    from harness.runners.cases import chunked_image_cases as chunked_image_cases
    from harness.runners.cases import default_cases as default_cases
    from harness.runners.cases import write_test_image as write_test_image
    from harness.runners.diff_tools import TOOL as TOOL
    from harness.runners.diff_tools import TOOL_VL as TOOL_VL
    from harness.runners.diff_tools import pick_tool as pick_tool
    from harness.runners.diff_tools import shows_b_images as shows_b_images
    from harness.runners.diff_tools import without_engine_text as without_engine_text
    from harness.runners.overlay import Overlay as Overlay
    from harness.runners.overlay import derived_name as derived_name
    from harness.runners.prompts import Image as Image
    from harness.runners.prompts import Prompt as Prompt
    from harness.runners.prompts import render_prompt_file as render_prompt_file
    from harness.runners.quant_matrix import QUANT_FORMATS as QUANT_FORMATS
    from harness.runners.quant_matrix import plan_matrix as plan_matrix
    from harness.runners.quant_matrix import skip_reason as skip_reason
    from harness.runners.quant_matrix import weight_sharing_supported as weight_sharing_supported
    from harness.runners.signatures import load_signatures as load_signatures
    from harness.runners.signatures import logcat_messages as logcat_messages
    from harness.runners.summary import find_summary as find_summary
    from harness.runners.summary import parse_number as parse_number
    from harness.runners.vl_chunks import POSDBG_ENV as POSDBG_ENV
    from harness.runners.vl_chunks import ROLES as ROLES
    from harness.runners.vl_chunks import ChunkedRun as ChunkedRun
    from harness.runners.vl_chunks import Chunking as Chunking
    from harness.runners.vl_chunks import RoleVerdict as RoleVerdict
    from harness.runners.vl_chunks import chunkings as chunkings
    from harness.runners.vl_chunks import image_grids as image_grids
    from harness.runners.vl_chunks import pads as pads
    from harness.runners.vl_chunks import positions_verdict as positions_verdict
    from harness.runners.vl_chunks import run_chunkings as run_chunkings
    from harness.runners.vl_chunks import shapes_verdict as shapes_verdict
