"""The measured HTP arch table: which single-op probe QNN built at which format on which arch.

`arch_limits.json` (shipped with the package) is written by `python -m harness.qnn.probe`, which
lowers each probe through ExecuTorch's QNN quantizer and `to_edge_transform_and_lower_to_qnn` on
the host QAIRT libraries and records QNN's answer (docs/qnn-arch-limits.md). Nothing here is
read from ExecuTorch's python rules: a cell is what QNN's validator and graph finalize said,
with the QAIRT version they said it in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness.errors import HarnessError
from harness.soc import normalize_arch

DEFAULT_PATH = Path(__file__).with_name("arch_limits.json")
SCHEMA_VERSION = 1
REGENERATE = "regenerate it with `python -m harness.qnn.probe` (the `qnn` extra) or reinstall the harness"

# QNN names nodes after the aten op (`aten_native_layer_norm_default_4`); the table's probes.
_OP_OF_ATEN: dict[str, str] = {
    "native_layer_norm": "layer_norm", "layer_norm": "layer_norm", "rms_norm": "rms_norm",
    "linear": "linear", "matmul": "matmul", "bmm": "matmul", "mm": "matmul",
    "convolution": "conv2d", "conv2d": "conv2d", "_softmax": "softmax", "softmax": "softmax",
}
_NODE = re.compile(r"^aten_(?P<op>.+?)_(?:default|Tensor|int|input)(?:_\d+)?$")


def op_kind(node: str) -> str:
    """`aten_native_layer_norm_default_4` -> `native_layer_norm`; other names are kept."""
    m = _NODE.match(node)
    return m.group("op") if m else node


def probe_of(op: str) -> str | None:
    """The table's probe for an aten op kind (`native_layer_norm` -> `layer_norm`), or None."""
    return _OP_OF_ATEN.get(op)


@dataclass(frozen=True)
class ArchCell:
    op: str
    fmt: str
    arch: str
    soc: str
    built: bool
    failure: str | None = None  # a QnnFailure value when not built
    needed_arch: str | None = None
    message: str = ""

    def to_json(self) -> dict[str, object]:
        return {"op": self.op, "format": self.fmt, "arch": self.arch, "soc": self.soc, "built": self.built,
                "failure": self.failure, "needed_arch": self.needed_arch, "message": self.message}


@dataclass(frozen=True)
class ArchTable:
    qairt: str
    executorch: str
    cells: tuple[ArchCell, ...]
    source: Path

    def cell(self, op: str, fmt: str, arch: str) -> ArchCell | None:
        return next((c for c in self.cells if (c.op, c.fmt, c.arch) == (op, fmt, arch)), None)

    def formats_built(self, op: str, arch: str) -> tuple[str, ...]:
        return tuple(c.fmt for c in self.cells if c.op == op and c.arch == arch and c.built)

    def rejected(self, fmt: str, arch: str) -> tuple[ArchCell, ...]:
        """The probes QNN did not build at `fmt` on `arch` (the workaround probe included)."""
        return tuple(c for c in self.cells if c.fmt == fmt and c.arch == arch and not c.built)

    def measured(self, fmt: str, arch: str) -> bool:
        return any(c.fmt == fmt and c.arch == arch for c in self.cells)

    @property
    def provenance(self) -> str:
        return f"QAIRT {self.qairt}, ExecuTorch {self.executorch}"


def _cell(raw: object, where: str) -> ArchCell:
    if not isinstance(raw, dict):
        raise HarnessError(f"{where} is not an object; {REGENERATE}")
    try:
        arch = normalize_arch(str(raw["arch"]))
        if arch is None:
            raise HarnessError(f"{where}: arch {raw['arch']!r} is not an HTP arch; {REGENERATE}")
        return ArchCell(str(raw["op"]), str(raw["format"]), arch, str(raw["soc"]), bool(raw["built"]),
                        raw.get("failure"), raw.get("needed_arch"), str(raw.get("message", "")))
    except KeyError as exc:
        raise HarnessError(f"{where}: key {exc.args[0]!r} missing; {REGENERATE}") from None


def load_arch_limits(path: Path | str | None = None) -> ArchTable:
    """The table (the packaged one by default); HarnessError naming the file when it is unusable."""
    return _load(Path(path) if path else DEFAULT_PATH)


@lru_cache(maxsize=4)
def _load(path: Path) -> ArchTable:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HarnessError(f"{path}: the measured HTP arch table is missing; {REGENERATE}") from None
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{path}: unreadable arch table ({exc}); {REGENERATE}") from None
    if not isinstance(data, dict) or data.get("version") != SCHEMA_VERSION:
        raise HarnessError(f"{path}: not an arch table of version {SCHEMA_VERSION}; {REGENERATE}")
    cells = data.get("cells")
    if not isinstance(cells, list) or not cells:
        raise HarnessError(f"{path}: no measured cells; {REGENERATE}")
    if not data.get("qairt") or not data.get("executorch"):
        raise HarnessError(f"{path}: the QAIRT or ExecuTorch version it was measured with is missing; {REGENERATE}")
    return ArchTable(str(data["qairt"]), str(data["executorch"]), tuple(load_cells(data, path)), path)


def load_cells(data: Mapping[str, object], path: Path) -> list[ArchCell]:
    """The cells of a table's JSON (HarnessError naming `path` and the cell when one is bad)."""
    cells = data.get("cells")
    if not isinstance(cells, list):
        raise HarnessError(f"{path}: no `cells` list; {REGENERATE}")
    return [_cell(c, f"{path}: cell #{i + 1}") for i, c in enumerate(cells)]


def packaged_table() -> ArchTable | None:
    """The shipped table, or None when it is not there (callers that can do without it)."""
    try:
        return load_arch_limits()
    except HarnessError:
        return None
