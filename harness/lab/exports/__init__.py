"""The night's export stage (docs/exports.md), on the plan's `exports:` (harness.lab.plan reads
them): the export cache (cache.py), one export's process group (process.py), its build
(build.py), its failure's class (classify.py), its testcase (results.py), the stage (stage.py), the suites'
testcases of a failed export (gate.py) and `harness export` (cli.py).
This `__init__` is the package's one face; names load on first use (PEP 562), so importing one
name imports only its module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "cache": ("ENTRY_FILE", "USED_FILE", "ExportCache", "default_cache_root", "export_key", "inputs_digest", "key_material"),
    "classify": ("TRANSIENT", "ExportFailure", "classify_failure"),
    "cli": ("export_from_cli", "failed_export_lines"),
    "declared": ("build_declared_reference",),
    "gate": ("ExportGate",),
    "leases": ("Leases",),
    "stage": ("export_status", "run_export_stage"),
    "build": ("Builder",),
    "results": ("ExportResult",),
    "tools": ("HostTools",),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.lab.exports.build import Builder as Builder
    from harness.lab.exports.cache import ENTRY_FILE as ENTRY_FILE
    from harness.lab.exports.cache import USED_FILE as USED_FILE
    from harness.lab.exports.cache import ExportCache as ExportCache
    from harness.lab.exports.cache import default_cache_root as default_cache_root
    from harness.lab.exports.cache import export_key as export_key
    from harness.lab.exports.cache import inputs_digest as inputs_digest
    from harness.lab.exports.cache import key_material as key_material
    from harness.lab.exports.classify import TRANSIENT as TRANSIENT
    from harness.lab.exports.classify import ExportFailure as ExportFailure
    from harness.lab.exports.classify import classify_failure as classify_failure
    from harness.lab.exports.cli import export_from_cli as export_from_cli
    from harness.lab.exports.cli import failed_export_lines as failed_export_lines
    from harness.lab.exports.declared import build_declared_reference as build_declared_reference
    from harness.lab.exports.gate import ExportGate as ExportGate
    from harness.lab.exports.leases import Leases as Leases
    from harness.lab.exports.results import ExportResult as ExportResult
    from harness.lab.exports.stage import export_status as export_status
    from harness.lab.exports.stage import run_export_stage as run_export_stage
    from harness.lab.exports.tools import HostTools as HostTools
