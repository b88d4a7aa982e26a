"""The quantization-format matrix (ExecuTorch `QuantDtype`) and what each HTP arch can run.

Limits (docs/executorch-runner.md#quantization-limits, `quantizer/annotators/htp_rules.py`):
block quantization (16a4w_block, "LPBQ") needs V69+, 16-bit activations with 16-bit weights need V73+. A cell
that an arch cannot run is *skipped with the reason*, never run and reported as a failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harness.errors import HarnessError
from harness.soc import normalize_arch

# QuantDtype order (value = enum value in ExecuTorch 1.5)
QUANT_FORMATS: dict[str, int] = {
    "16a16w": 0, "16a8w": 1, "16a4w": 2, "16a4w_block": 3, "8a8w": 4, "8a4w": 5, "fp16a8w": 6, "16a2w": 7,
}
_MIN_ARCH: dict[str, tuple[int, str]] = {
    "16a4w_block": (69, "LPBQ (16a4w block-wise quantization) requires V69 or newer"),
    "16a16w": (73, "16-bit activations + 16-bit weights requires V73 or newer"),
}


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


def skip_reason(quant: str, htp_arch: str) -> str | None:
    """Why `quant` cannot run on `htp_arch` (None when it can)."""
    q = normalize_quant(quant)
    arch = normalize_arch(htp_arch)
    if arch is None:
        raise HarnessError(f"{htp_arch!r} is not an HTP arch (v68 ... v81)")
    need = _MIN_ARCH.get(q)
    if need and int(arch[1:]) < need[0]:
        return f"{q} on HTP {arch}: {need[1]} (ExecuTorch htp_rules.py)"
    return None


def plan_matrix(quants: Iterable[str], targets: Iterable[tuple[str, str]] | Iterable[str]) -> list[MatrixCell]:
    """Cells for every (quant, target). Targets are arches ('v68') or (device, arch) pairs."""
    cells = []
    for t in targets:
        device, arch = (t if isinstance(t, tuple) else ("", t))
        arch_n = normalize_arch(arch)
        if arch_n is None:
            raise HarnessError(f"target {t!r}: {arch!r} is not an HTP arch (v68 ... v81)")
        for q in quants:
            qn = normalize_quant(q)
            cells.append(MatrixCell(qn, arch_n, device, skip_reason(qn, arch_n)))
    return cells


def weight_sharing_supported(htp_arch: str) -> bool:
    """Prefill/decode weight sharing in one context needs V73+ (ExecuTorch llama README)."""
    arch = normalize_arch(htp_arch)
    return arch is not None and int(arch[1:]) >= 73
