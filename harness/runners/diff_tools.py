"""Which teacher-forced logits tool a runtime holds, and what its output carries besides rows
(docs/logits-diff.md#vl-prompts). Kept apart from the tool's runner and parser."""

from __future__ import annotations

import posixpath
from functools import lru_cache

from harness.catalogue import SHAPE_SCOPES, Entry, load_catalogue
from harness.errors import TransportError
from harness.transport import MovesFiles

TOOL = "llm_logits_diff"
# The VL build: B also runs tokenizer_encode (the stock B never sees the prompt's images) and a
# padded chunk's last real row is read. Preferred when the runtime holds it.
TOOL_VL = "llm_logits_diff_vl"
TOOLS = (TOOL_VL, TOOL)

# The engine's own lines between the tool's rows: [POSDBG] dumps and the catalogue's shape lines
# (harness/catalogue/lines.yaml, the entries with a shape kind): never token text.
_POSDBG = "[POSDBG]"


def _engine_line_at(line: str) -> int | None:
    """Where an engine line starts in `line` (None: none does)."""
    found = [line.find(_POSDBG)] if _POSDBG in line else []
    found += [m.start() for e in _shape_lines() if (m := e.regex.search(line))]
    return min(found, default=None)


@lru_cache(maxsize=1)
def _shape_lines() -> tuple[Entry, ...]:
    return tuple(e for e in load_catalogue().in_scope(*SHAPE_SCOPES) if e.shape_kind)


def shows_b_images(tool_name: str) -> bool:
    """Does B see the prompt's images with this tool? The stock tool encodes for A only."""
    return tool_name == TOOL_VL


def pick_tool(transport: MovesFiles, runtime_dir: str) -> str | None:
    """The best tool the pushed runtime holds (VL first), None without one or on a link fault."""
    for name in TOOLS:
        try:
            if transport.stat(posixpath.join(runtime_dir, name)) is not None:
                return name
        except TransportError:
            return None
    return None


def without_engine_text(line: str) -> str | None:
    """`line` without an engine line glued to it (a token before a [POSDBG] tag stays);
    None when nothing of the tool's own output is left."""
    at = _engine_line_at(line)
    if at is None:
        return line
    return line[:at] or None
