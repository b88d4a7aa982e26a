"""The quantization-format matrix (ExecuTorch `QuantDtype`) and what each HTP arch can run.

What an arch runs is QNN's own answer, measured by `python -m harness.qnn.probe` on the host QNN
and shipped as harness/qnn/arch_limits.json (docs/qnn-arch-limits.md): a (format, arch) cell
is skipped with the reason when QNN's validator rejected an op every LLM of the suite needs, the
reason naming the ops, the arch QNN said they need and the QAIRT version it said it in. A cell
the table did not measure is not skipped. ExecuTorch's python rules are not read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harness.errors import HarnessError
from harness.qnn import ArchCell, ArchTable, load_arch_limits
from harness.soc import normalize_arch

# QuantDtype order (value = enum value in ExecuTorch 1.5)
QUANT_FORMATS: dict[str, int] = {
    "16a16w": 0, "16a8w": 1, "16a4w": 2, "16a4w_block": 3, "8a8w": 4, "8a4w": 5, "fp16a8w": 6, "16a2w": 7,
}
# The probes an LLM decoder cannot do without (one norm of the two is enough).
_NEEDED = ("linear", "matmul", "softmax")
_NORMS = ("layer_norm", "rms_norm")
_WORKAROUNDS = ("layer_norm_w4",)  # a different annotation, not the format's default one


@dataclass(frozen=True)
class MatrixCell:
    quant: str
    htp_arch: str
    device: str = ""
    skip_reason: str | None = None

    @property
    def runnable(self) -> bool:
        return self.skip_reason is None

    @property
    def id(self) -> str:
        return f"{self.device or self.htp_arch}-{self.quant}"


def normalize_quant(name: str) -> str:
    key = name.strip().lower().removeprefix("use_")
    if key not in QUANT_FORMATS:
        raise HarnessError(f"quantization format {name!r} is not one of {', '.join(QUANT_FORMATS)}")
    return key


def _blocking(rejected: tuple[ArchCell, ...]) -> list[ArchCell]:
    """The rejected cells that stop an LLM: a needed op, or both norms."""
    names = {c.op for c in rejected}
    norms_gone = all(n in names for n in _NORMS)
    return [c for c in rejected if c.op in _NEEDED or (norms_gone and c.op in _NORMS)]


def skip_reason(quant: str, htp_arch: str, table: ArchTable | None = None) -> str | None:
    """Why `quant` cannot run on `htp_arch` (None when it can), from the measured table
    (the packaged one by default; HarnessError naming the file when it is missing or bad)."""
    q = normalize_quant(quant)
    arch = normalize_arch(htp_arch)
    if arch is None:
        raise HarnessError(f"{htp_arch!r} is not an HTP arch (v68 ... v81)")
    table = table if table is not None else load_arch_limits()
    rejected = tuple(c for c in table.rejected(q, arch) if c.op not in _WORKAROUNDS)
    blocking = _blocking(rejected)
    if not blocking:
        return None
    needs = sorted({c.needed_arch for c in rejected if c.needed_arch})
    ops = ", ".join(c.op for c in rejected)
    need = f" (QNN: they need {' / '.join(needs)})" if needs else ""
    built = [f for f in QUANT_FORMATS if f != q and table.measured(f, arch)
             and not _blocking(tuple(c for c in table.rejected(f, arch) if c.op not in _WORKAROUNDS))]
    instead = f"; builds there: {', '.join(built)}" if built else ""
    return (f"{q} on HTP {arch}: QNN rejected {ops}{need}{instead} "
            f"(measured with {table.provenance}, {table.source.name})")


def plan_matrix(quants: Iterable[str], targets: Iterable[tuple[str, str] | str],
                table: ArchTable | None = None) -> list[MatrixCell]:
    """Cells for every (quant, target). Targets are arches ('v68') or (device, arch) pairs."""
    cells = []
    for t in targets:
        device, arch = (t if isinstance(t, tuple) else ("", t))
        arch_n = normalize_arch(arch)
        if arch_n is None:
            raise HarnessError(f"target {t!r}: {arch!r} is not an HTP arch (v68 ... v81)")
        for q in quants:
            qn = normalize_quant(q)
            cells.append(MatrixCell(qn, arch_n, device, skip_reason(qn, arch_n, table)))
    return cells


def weight_sharing_supported(htp_arch: str) -> bool:
    """Prefill/decode weight sharing in one context needs V73+ (ExecuTorch llama README)."""
    arch = normalize_arch(htp_arch)
    return arch is not None and int(arch[1:]) >= 73
