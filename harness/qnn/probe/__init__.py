"""The HTP arch probe (`python -m harness.qnn.probe`): single-op lowerings per (format, SoC) in
children, the measured table written to harness/qnn/arch_limits.json.
This `__init__` is the package's one face; names load on first use (PEP 562), so importing one
name imports only its module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "probes": ("DEFAULT_FORMATS", "PROBE_NAMES"),
    "run": ("SOC_OF_ARCH", "Batch", "ChildRun", "measure_batch"),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.qnn.probe.probes import DEFAULT_FORMATS as DEFAULT_FORMATS
    from harness.qnn.probe.probes import PROBE_NAMES as PROBE_NAMES
    from harness.qnn.probe.run import SOC_OF_ARCH as SOC_OF_ARCH
    from harness.qnn.probe.run import Batch as Batch
    from harness.qnn.probe.run import ChildRun as ChildRun
    from harness.qnn.probe.run import measure_batch as measure_batch
