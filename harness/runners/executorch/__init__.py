"""ExecuTorch's QNN runners and what they leave, this package's one face: device_runners.py
runs `qnn_llama_runner` / `qnn_executor_runner` on a device, runner.py is the suite's runner over
a runtime (device binaries or the host's), output.py reads what the LLM runner prints (cli.py:
`python -m harness.runners.executorch`), catalogue.py lists an ExecuTorch export's artifacts,
etdump.py and etdump_qnn.py read an ETDump (`python -m harness.runners.executorch.etdump[_qnn]`).
Names load on first use (PEP 562), so a CLI submodule imports no sibling before it runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {
    "catalogue": ("TOKENIZERS", "ArtifactKind", "EtArtifact", "EtCatalogue", "is_host_material", "read_catalogue"),
    "device_runners": ("EVAL_MODES", "EtRunResult", "LlamaRunConfig", "QnnExecutorRunner", "QnnLlamaRunner",
                       "parse_inference_speed"),
    "etdump": ("EtdumpReport", "OpRow", "analyse_etdump", "analyse_rows", "executorch_available", "format_table",
               "load_rows"),
    "etdump_qnn": ("RUNTIME_UNIT", "QnnEtdump", "QnnOpEvent", "QnnSummaryEvent", "analyse_qnn_etdump", "format_qnn",
                   "graph_nodes_of", "qnn_view"),
    "output": ("LOG_LINE", "LogLine", "RunOutput", "observer_metrics", "parse_observer", "parse_run"),
    "runner": ("ExecutorchRunner", "PteRun"),
})

if TYPE_CHECKING:
    from harness.runners.executorch.catalogue import (
        TOKENIZERS,
        ArtifactKind,
        EtArtifact,
        EtCatalogue,
        is_host_material,
        read_catalogue,
    )
    from harness.runners.executorch.device_runners import (
        EVAL_MODES,
        EtRunResult,
        LlamaRunConfig,
        QnnExecutorRunner,
        QnnLlamaRunner,
        parse_inference_speed,
    )
    from harness.runners.executorch.etdump import (
        EtdumpReport,
        OpRow,
        analyse_etdump,
        analyse_rows,
        executorch_available,
        format_table,
        load_rows,
    )
    from harness.runners.executorch.etdump_qnn import (
        RUNTIME_UNIT,
        QnnEtdump,
        QnnOpEvent,
        QnnSummaryEvent,
        analyse_qnn_etdump,
        format_qnn,
        graph_nodes_of,
        qnn_view,
    )
    from harness.runners.executorch.output import (
        LOG_LINE,
        LogLine,
        RunOutput,
        observer_metrics,
        parse_observer,
        parse_run,
    )
    from harness.runners.executorch.runner import ExecutorchRunner, PteRun
