"""A realistic night of records for reporter tests (two devices, a crash, garbled text,
a quarantined device, hostile model output)."""

from __future__ import annotations

from harness.outcomes import FailureClass
from harness.pairs import BackendPair
from harness.report import TestRecord
from harness.verdict import Verdict

HOSTILE = "<script>alert('x')</script> & \"quotes\" ]]> \x1b[31mred\x1b[0m \x00nul \ufffd 你好"


def night_records(decode_scale: float = 1.0, crash: bool = True, run_id: str = "n1") -> list[TestRecord]:
    recs = []
    for dev, soc, arch in (("oneplus13", "SM8750", "v79"), ("sa8295", "SA8295", "v68")):
        for pair, tps in (("qnn", 40.0), ("cpu", 12.0)):
            for prompt in ("p1", "p2"):
                recs.append(TestRecord(
                    name=f"smollm2::matrix[{pair}]::{prompt}", suite="matrix", device=dev, soc_model=soc, htp_arch=arch,
                    model="smollm2", backend_pair=BackendPair.parse(pair), text="The capital of France is Paris.", verdict="coherent",
                    duration_s=1.5, prefill_tps=tps * 8 * decode_scale, decode_tps=tps * decode_scale, load_s=0.8,
                    extras={"run_id": run_id, "transport": "adb" if dev == "oneplus13" else "ssh"}))
    if crash:
        bad = recs[2]  # oneplus13 cpu p1
        bad.set_verdict(Verdict.failed(FailureClass.CRASH, "llm_demo exited 139 (SIGSEGV)"))
        bad.signature = "sigsegv-in-llm-demo"
        bad.log_excerpt = "load model\nSegmentation fault <core dumped> & more"
        bad.text = HOSTILE
        bad.decode_tps = bad.prefill_tps = None
    garbled = recs[5]  # sa8295 qnn p2
    garbled.set_verdict(Verdict.failed(FailureClass.GARBLED, "token soup"))
    garbled.verdict = "garbled"
    garbled.text = "asdf qwer zxcv " * 5
    health = TestRecord(name="lab::health", suite="lab", device="pixel-dead", soc_model="SM8650", htp_arch="v75",
                        signature="lab:health", extras={"run_id": run_id})
    health.set_verdict(Verdict.error(FailureClass.QUARANTINED, "pixel-dead: device offline"))
    skipped = TestRecord(name="matrix/smollm2#1", suite="matrix", device="pixel-dead", soc_model="SM8650",
                         htp_arch="v75", model="smollm2", extras={"run_id": run_id})
    skipped.set_verdict(Verdict.skipped("not run: device quarantined", FailureClass.QUARANTINED))
    recs += [health, skipped]
    return recs
