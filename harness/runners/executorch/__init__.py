"""ExecuTorch's QNN runners and what they leave, this package's one face: device_runners.py
runs `qnn_llama_runner` / `qnn_executor_runner` on a device, runner.py is the suite's runner over
a runtime (device binaries or the host's), output.py reads what the LLM runner prints (cli.py:
`python -m harness.runners.executorch`), catalogue.py lists an ExecuTorch export's artifacts,
etdump.py and qnn_profile.py read an ETDump (`python -m harness.runners.executorch.etdump`, `...executorch.qnn_profile`),
localize.py runs a debug program for harness.checks.localize.
Names load on first use (PEP 562), so a CLI submodule imports no sibling before it runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "catalogue": ("TOKENIZERS", "UNRECORDED_QNN", "ArtifactKind", "EtArtifact", "EtCatalogue", "holds_programs",
                  "is_host_material", "read_catalogue", "recorded_format"),
    "device_runners": ("EVAL_MODES", "EtRunResult", "LlamaRunConfig", "QnnExecutorRunner", "QnnLlamaRunner",
                       "parse_inference_speed"),
    "etdump": ("EtdumpReport", "OpRow", "analyse_etdump", "analyse_rows", "executorch_available", "format_table",
               "load_rows"),
    "qnn_profile": ("RUNTIME_UNIT", "QnnEtdump", "QnnOpEvent", "QnnSummaryEvent", "analyse_qnn_etdump", "format_qnn",
                   "graph_nodes_of", "qnn_view"),
    "localize": ("run_debug_program",),
    "output": ("LOG_LINE", "LogLine", "RunOutput", "observer_metrics", "parse_observer", "parse_run"),
    "runner": ("ExecutorchRunner", "PteRun"),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.runners.executorch.catalogue import TOKENIZERS as TOKENIZERS
    from harness.runners.executorch.catalogue import UNRECORDED_QNN as UNRECORDED_QNN
    from harness.runners.executorch.catalogue import ArtifactKind as ArtifactKind
    from harness.runners.executorch.catalogue import EtArtifact as EtArtifact
    from harness.runners.executorch.catalogue import EtCatalogue as EtCatalogue
    from harness.runners.executorch.catalogue import holds_programs as holds_programs
    from harness.runners.executorch.catalogue import is_host_material as is_host_material
    from harness.runners.executorch.catalogue import read_catalogue as read_catalogue
    from harness.runners.executorch.catalogue import recorded_format as recorded_format
    from harness.runners.executorch.device_runners import EVAL_MODES as EVAL_MODES
    from harness.runners.executorch.device_runners import EtRunResult as EtRunResult
    from harness.runners.executorch.device_runners import LlamaRunConfig as LlamaRunConfig
    from harness.runners.executorch.device_runners import QnnExecutorRunner as QnnExecutorRunner
    from harness.runners.executorch.device_runners import QnnLlamaRunner as QnnLlamaRunner
    from harness.runners.executorch.device_runners import parse_inference_speed as parse_inference_speed
    from harness.runners.executorch.etdump import EtdumpReport as EtdumpReport
    from harness.runners.executorch.etdump import OpRow as OpRow
    from harness.runners.executorch.etdump import analyse_etdump as analyse_etdump
    from harness.runners.executorch.etdump import analyse_rows as analyse_rows
    from harness.runners.executorch.etdump import executorch_available as executorch_available
    from harness.runners.executorch.etdump import format_table as format_table
    from harness.runners.executorch.etdump import load_rows as load_rows
    from harness.runners.executorch.localize import run_debug_program as run_debug_program
    from harness.runners.executorch.output import LOG_LINE as LOG_LINE
    from harness.runners.executorch.output import LogLine as LogLine
    from harness.runners.executorch.output import RunOutput as RunOutput
    from harness.runners.executorch.output import observer_metrics as observer_metrics
    from harness.runners.executorch.output import parse_observer as parse_observer
    from harness.runners.executorch.output import parse_run as parse_run
    from harness.runners.executorch.qnn_profile import RUNTIME_UNIT as RUNTIME_UNIT
    from harness.runners.executorch.qnn_profile import QnnEtdump as QnnEtdump
    from harness.runners.executorch.qnn_profile import QnnOpEvent as QnnOpEvent
    from harness.runners.executorch.qnn_profile import QnnSummaryEvent as QnnSummaryEvent
    from harness.runners.executorch.qnn_profile import analyse_qnn_etdump as analyse_qnn_etdump
    from harness.runners.executorch.qnn_profile import format_qnn as format_qnn
    from harness.runners.executorch.qnn_profile import graph_nodes_of as graph_nodes_of
    from harness.runners.executorch.qnn_profile import qnn_view as qnn_view
    from harness.runners.executorch.runner import ExecutorchRunner as ExecutorchRunner
    from harness.runners.executorch.runner import PteRun as PteRun
