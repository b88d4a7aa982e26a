"""harness.pairs: the one home of backend pairs."""

from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.pairs import (
    ALL_NAMES,
    Backend,
    BackendPair,
    PairError,
    cpu_first,
    is_cpu_reference,
    reference_of,
    uses_qnn,
)


@pytest.mark.parametrize("name, llm, visual, qnn_llm, qnn_visual", [
    ("qnn/cpu", Backend.CPU, Backend.QNN, False, True),  # visual/llm: visual on QNN, LLM on CPU
    ("cpu/qnn", Backend.QNN, Backend.CPU, True, False),
    ("qnn/qnn", Backend.QNN, Backend.QNN, True, True),
    ("cpu/cpu", Backend.CPU, Backend.CPU, False, False),
    ("qnn", Backend.QNN, None, True, False),
    ("cpu", Backend.CPU, None, False, False),
])
def test_parse_visual_llm(name: str, llm: Backend, visual: Backend | None, qnn_llm: bool, qnn_visual: bool) -> None:
    pair = BackendPair.parse(name)
    assert (pair.llm, pair.visual) == (llm, visual)
    assert (pair.uses_qnn_llm, pair.uses_qnn_visual) == (qnn_llm, qnn_visual)
    assert pair.is_qnn == (qnn_llm or qnn_visual) and pair.is_cpu_reference == (not pair.is_qnn)
    assert str(pair) == pair.name == name and BackendPair.parse(pair) is pair


def test_parse_tolerates_case_and_refuses_non_pairs() -> None:
    assert BackendPair.parse(" QNN/Cpu ").name == "qnn/cpu"
    for bad in ("npu", "qnn/cpu/cpu", "", "qnn/"):
        with pytest.raises(PairError, match="not one of") as info:
            BackendPair.parse(bad)
        assert isinstance(info.value, HarnessError)
        assert BackendPair.try_parse(bad) is None and not uses_qnn(bad) and not is_cpu_reference(bad)


def test_config_names_and_pair_from_content() -> None:
    assert BackendPair.parse("qnn/cpu").config_name == "config_cpu_llm_qnn_visual.json"
    assert BackendPair.parse("qnn").config_name == "config_qnn.json"
    assert BackendPair.parse("cpu/cpu").config_name == "config.json"
    vl = {"llm_model": "qnn/llm.mnn", "visual_model": "visual.mnn"}
    assert BackendPair.of_config(vl, visual=True).name == "cpu/qnn"
    assert BackendPair.of_config(vl, visual=False).name == "qnn"
    assert BackendPair.of_config({}, visual=True).name == "cpu/cpu"  # exporter defaults llm.mnn, visual.mnn
    assert BackendPair.of_config({"llm_model": "models/qnn/llm.mnn"}, visual=False).is_qnn
    assert not BackendPair.of_config({"llm_model": "qnn_llm.mnn"}, visual=False).is_qnn
    # The virtual lab names both sides of a text model's pair.
    assert BackendPair.parse("qnn").visual_llm == "cpu/qnn"
    assert set(ALL_NAMES) == {p.name for v in (True, False) for p in BackendPair.all(visual=v)}


def test_cpu_first_and_reference() -> None:
    assert cpu_first(["qnn/qnn", "qnn/cpu", "cpu/cpu", "cpu/qnn"]) == ["cpu/cpu", "qnn/qnn", "qnn/cpu", "cpu/qnn"]
    assert cpu_first(["qnn", "cpu"]) == ["cpu", "qnn"]
    assert reference_of({"qnn": 1, "cpu": 2}) == "cpu" and reference_of(["qnn/qnn"]) is None
    assert BackendPair.cpu_reference(visual=True).name == "cpu/cpu"
    assert BackendPair.cpu_reference(visual=False).name == "cpu"
