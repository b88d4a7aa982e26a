"""The report's matrix says where each cell ran (harness/report/where_ran.py): its tier badge
(NPU, HTP emulator, CPU), the runtime's QAIRT build, the placement read from the real program or
stub (the shared KV program's one Cast, the real SmolLM2 NPU stub's QNN graphs) and, for a
`cpu-fallback`, the ops that made it; the devices table names the tiers too. A CPU pass carries
the CPU badge and no NPU one."""

from __future__ import annotations

import re
from pathlib import Path

from harness.evidence import PlacementEvidence, Provenance, Tier
from harness.outcomes import FailureClass
from harness.pairs import BackendPair
from harness.qnn import read_placement
from harness.report import TestRecord, render_html
from harness.report.where_ran import where_ran
from harness.verdict import Verdict
from tests.qnn.material import et_qnn_or_skip

QAIRT = "v2.49.40.250930"


def _rec(name: str, pair: str, device: str = "sm8650-emu") -> TestRecord:
    rec = TestRecord(name=name, suite="executorch_qnn", device=device, soc_model="SM8650", htp_arch="v75",
                     model="qnn-host")
    rec.backend_pair = BackendPair.parse(pair)
    return rec


def _records(kv: Path) -> list[TestRecord]:
    placement = read_placement(kv)
    good = _rec("test_quant_format_runs[16a8w]", "qnn:16a8w")
    good.put(Provenance(Tier.EMULATOR, QAIRT, "ab" * 32))
    good.put(PlacementEvidence(kv.name, placement, {"dim_order_ops::_to_dim_order_copy": 1}, {},
                               {"delegated": 0.97, "cpu": 0.03}))
    good.set_verdict(Verdict.passed())
    fell = _rec("test_quant_format_runs[16a4w]", "qnn:16a4w")
    fell.put(Provenance(Tier.EMULATOR, QAIRT))
    fell.put(PlacementEvidence(kv.name, placement, {}, {"dim_order_ops::_to_dim_order_copy.out": 1}))
    fell.set_verdict(Verdict.failed(FailureClass.CPU_FALLBACK, "kv.pte: ops on the CPU beyond those expected"))
    cpu = _rec("test_cpu_export_runs", "cpu:xnnpack", device="host")
    cpu.put(Provenance(Tier.CPU))
    cpu.set_verdict(Verdict.passed())
    return [good, fell, cpu]


def _cell(page: str, pair: str, device: str) -> str:
    table = page[page.index(f'id="matrix-{device}"'):]
    table = table[:table.index("</table>")]
    head = re.findall(r"<th>([^<]*)</th>", table[:table.index("</thead>")])
    cells = re.findall(r"<td class=\"(?:pass|fail|skip|flaky)\">.*?</td>", table, re.S)
    return cells[head.index(pair) - 2]  # after suite and model


def test_each_cell_says_where_it_ran() -> None:
    kv = et_qnn_or_skip("llm", "kv-16a8w-sm8650.pte")
    page = render_html(_records(kv), title="night")
    good = _cell(page, "qnn:16a8w", "sm8650-emu")
    assert '<span class="tier tier-emulator">HTP emulator</span>' in good and "NPU</span>" not in good
    assert f"QAIRT {QAIRT}" in good
    assert "kv-16a8w-sm8650.pte: QnnBackend x2; on the CPU: dim_order_ops::_to_dim_order_copy.out x1" in good
    assert "delegated 97.0% of op time (ETDump)" in good and "cpu-fallback:" not in good
    fell = _cell(page, "qnn:16a4w", "sm8650-emu")
    assert "FAIL 1/1 (cpu-fallback)" in fell
    assert "cpu-fallback: on the CPU beyond those expected: dim_order_ops::_to_dim_order_copy.out x1" in fell
    cpu = _cell(page, "cpu:xnnpack", "host")
    assert "PASS 1/1" in cpu and '<span class="tier tier-cpu">CPU</span>' in cpu and "tier-npu" not in cpu
    devices = page[page.index('<table class="devices">'):]
    devices = devices[:devices.index("</table>")]
    assert re.search(r"<td>host</td>.*?tier-cpu\">CPU</span>", devices, re.S)
    assert re.search(r"<td>sm8650-emu</td>.*?tier-emulator\">HTP emulator</span>", devices, re.S)


def test_an_mnn_stub_with_no_qnn_graph_is_named_a_fallback() -> None:
    from harness.evidence import Placement

    rec = _rec("test_generation[qnn-france]", "qnn")
    rec.put(Provenance(Tier.NPU, QAIRT))
    rec.put(PlacementEvidence("qnn/llm.mnn", Placement(()), {}, {}, runtime_qnn_inits=0))
    where = where_ran([rec])
    assert where.runtime == "llm_demo: 0 QNN plugin inits"
    assert "llm_demo: 0 QNN plugin inits" in render_html([rec], title="t")
    assert [t.label for t in where.tiers] == ["NPU"]
    assert where.fallback == "no QNN delegate: everything ran on the CPU"
    assert where_ran([_rec("x", "cpu")]).empty  # a record without evidence shows nothing
