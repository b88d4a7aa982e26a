"""The nightly plan (`nightly.yaml`), read and validated: this package's one face. Outside code
imports its names from here; load.py reads the file, specs.py holds its parts as data, fields.py,
paths.py and suites.py read its values, paths and `models:`/`suites:`."""

from __future__ import annotations

from harness.lab.plan.bisect_spec import NightBisect
from harness.lab.plan.export_spec import (
    REFERENCE_MODULE,
    ExportBuild,
    ExportJob,
    ExportsSpec,
    ReferenceSpec,
    Target,
    default_parallel,
)
from harness.lab.plan.exports import parse_exports
from harness.lab.plan.load import Plan, load_plan, parse_plan
from harness.lab.plan.specs import (
    PATH_FIELDS,
    ConcurrencySettings,
    HistorySettings,
    LockSettings,
    ModelSpec,
    NoDeviceMatched,
    PlanEntry,
    PlanError,
    RecoverySettings,
    SuiteSpec,
)
from harness.lab.plan.suites import BACKEND_PAIRS, RUNNERS

__all__ = ["BACKEND_PAIRS", "PATH_FIELDS", "REFERENCE_MODULE", "RUNNERS", "ConcurrencySettings", "ExportBuild", "ExportJob", "ExportsSpec",
           "HistorySettings", "LockSettings", "ModelSpec", "NightBisect", "NoDeviceMatched", "Plan", "PlanEntry", "PlanError",
           "RecoverySettings", "ReferenceSpec", "SuiteSpec", "Target", "default_parallel", "load_plan", "parse_exports", "parse_plan"]
