"""The ExecuTorch suite, this package's one face: checks.py holds its input (EtInput) and the
checks of a quant format's runs, the CPU exports and a load failure; profile.py the ETDump
profile; placement.py where a QNN cell's program runs its work (cpu-fallback) and its
provenance; float_reference.py a QNN cell's verdict (per op, then the budget); judged.py whether
the run judged anything; input.py builds the input for a device or the host lane; on_device.py
`harness localize`'s debug run on a device. Names load on first use
(PEP 562): the suite registry needs the checks, not the input's provisioning."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "checks": ("FORWARD_ITERATIONS", "HOST_SEQ_LEN", "PROMPT", "EtInput", "cpu_export_runs", "host_python_env",
               "load_failure_is_classified", "qnn_failure", "quant_format_runs"),
    "input": ("build_et_input", "is_host_lane"),
    "judged": ("nothing_unjudged",),
    "localize": ("format_cell", "localize_format"),
    "on_device": ("LocalizeAnswer", "LocalizeRequest", "localize_on_device"),
    "placement": ("EXPECTED_CPU_OPS", "judge_placement", "stamp_provenance"),
    "profile": ("SUMMARY_KEYS", "etdump_profile"),
    "weigh": ("program_size",),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.suite.executorch.checks import FORWARD_ITERATIONS as FORWARD_ITERATIONS
    from harness.suite.executorch.checks import HOST_SEQ_LEN as HOST_SEQ_LEN
    from harness.suite.executorch.checks import PROMPT as PROMPT
    from harness.suite.executorch.checks import EtInput as EtInput
    from harness.suite.executorch.checks import cpu_export_runs as cpu_export_runs
    from harness.suite.executorch.checks import host_python_env as host_python_env
    from harness.suite.executorch.checks import load_failure_is_classified as load_failure_is_classified
    from harness.suite.executorch.checks import qnn_failure as qnn_failure
    from harness.suite.executorch.checks import quant_format_runs as quant_format_runs
    from harness.suite.executorch.input import build_et_input as build_et_input
    from harness.suite.executorch.input import is_host_lane as is_host_lane
    from harness.suite.executorch.judged import nothing_unjudged as nothing_unjudged
    from harness.suite.executorch.localize import format_cell as format_cell
    from harness.suite.executorch.localize import localize_format as localize_format
    from harness.suite.executorch.on_device import LocalizeAnswer as LocalizeAnswer
    from harness.suite.executorch.on_device import LocalizeRequest as LocalizeRequest
    from harness.suite.executorch.on_device import localize_on_device as localize_on_device
    from harness.suite.executorch.placement import EXPECTED_CPU_OPS as EXPECTED_CPU_OPS
    from harness.suite.executorch.placement import judge_placement as judge_placement
    from harness.suite.executorch.placement import stamp_provenance as stamp_provenance
    from harness.suite.executorch.profile import SUMMARY_KEYS as SUMMARY_KEYS
    from harness.suite.executorch.profile import etdump_profile as etdump_profile
    from harness.suite.executorch.weigh import program_size as program_size
