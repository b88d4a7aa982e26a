"""Everything that talks to QNN, this package's one face: the host's x86 QAIRT libraries
(host.py: where, which version, whether the installed ExecuTorch can drive them; buildid.py
reads a library's build in a child), context binaries read by libQnnSystem.so (ctx.py +
layouts.py), the binaries inside an ExecuTorch .pte (pte.py) and where its work runs
(placement.py, an MNN NPU stub's too), the binary x runtime QAIRT rule and its
measured table (compat.py + compat.json; trial_load.py asks QNN itself), the measured HTP arch table
(arch_limits.py + arch_limits.json), QNN's failures read from a lowering's or run's log (log.py,
`python -m harness.qnn.log`; its lines are the failure catalogue's). Sub-packages have faces of their own: compiled_io/ (an
export's compiled IO, `python -m harness.qnn.compiled_io`) and probe/ (the arch probe,
`python -m harness.qnn.probe`). Facts in docs/host-qnn.md. Names load on first use (PEP 562),
so a `harness push` or a CLI of a sub-package does not import ctypes or the arch table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "arch_limits": ("DEFAULT_PATH", "SCHEMA_VERSION", "ArchCell", "ArchTable", "load_arch_limits", "load_cells",
                    "op_kind", "packaged_table", "probe_of"),
    "compat": ("COMPAT_TABLE_PATH", "CompatCell", "CompatTable", "loads_on"),
    "ctx": ("BinaryInfo", "ContextBinaryError", "GraphInfo", "QnnSystemLib", "TensorInfo", "read_context_binary"),
    "log": ("FAILURE_CLASS", "QnnFailure", "QnnLogVerdict", "classify_qnn_log", "exit_status"),
    "host": ("HOST_QNN_SWITCH", "HostQnn", "QnnAbiMismatch", "QnnPairingUnverified", "QnnUnavailable",
             "auto_host_qnn", "check_executorch_pairing", "find_host_qnn", "qairt_tuple", "qairt_version_of",
             "scan_qairt_build"),
    "placement": ("qnn_plugin_inits", "read_placement", "read_stub_placement"),
    "mnn_npu_log": ("convert_log_of", "read_npu_log"),
    "trial_load": ("TrialLoadError", "trial"),
    "pte": ("PteError", "QnnDelegate", "check_program", "context_binaries", "is_pte", "qnn_delegates"),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.qnn.arch_limits import DEFAULT_PATH as DEFAULT_PATH
    from harness.qnn.arch_limits import SCHEMA_VERSION as SCHEMA_VERSION
    from harness.qnn.arch_limits import ArchCell as ArchCell
    from harness.qnn.arch_limits import ArchTable as ArchTable
    from harness.qnn.arch_limits import load_arch_limits as load_arch_limits
    from harness.qnn.arch_limits import load_cells as load_cells
    from harness.qnn.arch_limits import op_kind as op_kind
    from harness.qnn.arch_limits import packaged_table as packaged_table
    from harness.qnn.arch_limits import probe_of as probe_of
    from harness.qnn.compat import COMPAT_TABLE_PATH as COMPAT_TABLE_PATH
    from harness.qnn.compat import CompatCell as CompatCell
    from harness.qnn.compat import CompatTable as CompatTable
    from harness.qnn.compat import loads_on as loads_on
    from harness.qnn.ctx import BinaryInfo as BinaryInfo
    from harness.qnn.ctx import ContextBinaryError as ContextBinaryError
    from harness.qnn.ctx import GraphInfo as GraphInfo
    from harness.qnn.ctx import QnnSystemLib as QnnSystemLib
    from harness.qnn.ctx import TensorInfo as TensorInfo
    from harness.qnn.ctx import read_context_binary as read_context_binary
    from harness.qnn.host import HOST_QNN_SWITCH as HOST_QNN_SWITCH
    from harness.qnn.host import HostQnn as HostQnn
    from harness.qnn.host import QnnAbiMismatch as QnnAbiMismatch
    from harness.qnn.host import QnnPairingUnverified as QnnPairingUnverified
    from harness.qnn.host import QnnUnavailable as QnnUnavailable
    from harness.qnn.host import auto_host_qnn as auto_host_qnn
    from harness.qnn.host import check_executorch_pairing as check_executorch_pairing
    from harness.qnn.host import find_host_qnn as find_host_qnn
    from harness.qnn.host import qairt_tuple as qairt_tuple
    from harness.qnn.host import qairt_version_of as qairt_version_of
    from harness.qnn.host import scan_qairt_build as scan_qairt_build
    from harness.qnn.log import FAILURE_CLASS as FAILURE_CLASS
    from harness.qnn.log import QnnFailure as QnnFailure
    from harness.qnn.log import QnnLogVerdict as QnnLogVerdict
    from harness.qnn.log import classify_qnn_log as classify_qnn_log
    from harness.qnn.log import exit_status as exit_status
    from harness.qnn.mnn_npu_log import convert_log_of as convert_log_of
    from harness.qnn.mnn_npu_log import read_npu_log as read_npu_log
    from harness.qnn.placement import qnn_plugin_inits as qnn_plugin_inits
    from harness.qnn.placement import read_placement as read_placement
    from harness.qnn.placement import read_stub_placement as read_stub_placement
    from harness.qnn.pte import PteError as PteError
    from harness.qnn.pte import QnnDelegate as QnnDelegate
    from harness.qnn.pte import check_program as check_program
    from harness.qnn.pte import context_binaries as context_binaries
    from harness.qnn.pte import is_pte as is_pte
    from harness.qnn.pte import qnn_delegates as qnn_delegates
    from harness.qnn.trial_load import TrialLoadError as TrialLoadError
    from harness.qnn.trial_load import trial as trial
