"""A link fault a runner caught reaches the night's worker as the fault itself: the cell's
record keeps it (in memory, not in its JSON line) and the worker's ConnectionDropped carries
its device, argv, exit code and output, not only the record's message."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

import pytest

from harness import pipeline
from harness.errors import CommandOutcomeUnknown, ConnectionDropped
from harness.lab import EntryRun
from harness.outcomes import FailureClass, Status
from harness.pairs import BackendPair
from harness.report import TestRecord
from harness.runners import Prompt, PromptCase
from harness.runners.llm_demo import LlmDemoResult, ProcessRun, analyse
from tests.pipeline.cellkit import cell_record

PROMPT = Prompt("What is the capital of France? Answer briefly.", id="france")
FAULT = CommandOutcomeUnknown("dev0: connection lost during a shell command after it was handed to the device",
                              device="dev0", argv=("/rt/llm_demo", "config.json", "prompts.txt"), stdout="partial")


def _cut_run() -> pipeline.PairRun:
    parsed, cls = analyse("", "", exit_code=None, prompts=[PROMPT.text], transport_error=str(FAULT))
    proc = ProcessRun(list(FAULT.argv), [PROMPT.text], "", "", None, None, False, 0.0, parsed, cls, fault=FAULT)
    return pipeline.PairRun(BackendPair.parse("cpu"), LlmDemoResult([proc], parsed.prompts))


def test_the_cells_record_keeps_the_fault_out_of_its_json_line() -> None:
    cut = _cut_run()
    runs = {cut.pair: cut}
    rec = cell_record(runs, pipeline.judge_matrix(runs, [PromptCase(PROMPT, ())])[0], device="dev0")
    assert rec.status == Status.FAILED and rec.failure_class == FailureClass.TRANSPORT_ERROR
    assert rec.link_fault is FAULT
    line = json.loads(rec.to_json())
    assert "link_fault" not in line and line["failure_class"] == "transport-error"
    assert TestRecord.from_dict(line).link_fault is None


def test_the_worker_raises_a_connection_drop_carrying_the_faults_data() -> None:
    rec = TestRecord(name="test_generation[cpu-france]", suite="s", device="dev0", status=Status.FAILED,
                     failure_class=FailureClass.TRANSPORT_ERROR, message="link lost", link_fault=FAULT)
    run = EntryRun(cast(Any, SimpleNamespace(device=SimpleNamespace(name="dev0"))), cast(Any, None))
    with pytest.raises(ConnectionDropped) as info:
        run.deliver(rec)
    err = info.value
    assert str(err) == "dev0: link lost during test_generation[cpu-france]: link lost" and err.retryable
    assert (err.device, err.argv, err.stdout) == ("dev0", FAULT.argv, "partial") and err.__cause__ is FAULT
    assert run.records == []  # not delivered: the entry is retried after a reconnect


def test_a_record_classed_transport_error_without_a_kept_fault_still_names_the_device() -> None:
    rec = TestRecord(name="t", suite="s", device="dev0", status=Status.ERROR,
                     failure_class=FailureClass.TRANSPORT_ERROR, message="adb: device offline")
    run = EntryRun(cast(Any, SimpleNamespace(device=SimpleNamespace(name="dev0"))), cast(Any, None))
    with pytest.raises(ConnectionDropped) as info:
        run.deliver(rec)
    assert (info.value.device, info.value.argv) == ("dev0", ())
