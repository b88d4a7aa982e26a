"""Plain padded text columns for the terminal (`harness devices`, `harness lab status`).

Not rich.table: two callers print a few lines, and rich costs ~29 ms of import in a CLI
whose start-up is measured (benchmarks/provision.py)."""

from __future__ import annotations

from collections.abc import Sequence


def text_table(rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two blanks apart, sized to the widest cell; no trailing blanks."""
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


__all__ = ["text_table"]
