"""A realistic night of records for reporter tests (two devices, a crash, garbled text,
a quarantined device, hostile model output)."""

from __future__ import annotations

from harness.report.records import TestRecord

HOSTILE = "<script>alert('x')</script> & \"quotes\" ]]> \x1b[31mred\x1b[0m \x00nul \ufffd 你好"


def night_records(decode_scale: float = 1.0, crash: bool = True, run_id: str = "n1") -> list[TestRecord]:
    recs = []
    for dev, soc, arch in (("oneplus13", "SM8750", "v79"), ("sa8295", "SA8295", "v68")):
        for pair, tps in (("qnn", 40.0), ("cpu", 12.0)):
            for prompt in ("p1", "p2"):
                recs.append(TestRecord(
                    name=f"smollm2::matrix[{pair}]::{prompt}", suite="matrix", device=dev, soc_model=soc, htp_arch=arch,
                    model="smollm2", backend_pair=pair, text="The capital of France is Paris.", verdict="coherent",
                    duration_s=1.5, prefill_tps=tps * 8 * decode_scale, decode_tps=tps * decode_scale, load_s=0.8,
                    extras={"run_id": run_id, "transport": "adb" if dev == "oneplus13" else "ssh"}))
    if crash:
        bad = recs[2]  # oneplus13 cpu p1
        bad.status, bad.failure_class, bad.signature = "failed", "crash", "sigsegv-in-llm-demo"
        bad.message = "llm_demo exited 139 (SIGSEGV)"
        bad.log_excerpt = "load model\nSegmentation fault <core dumped> & more"
        bad.text = HOSTILE
        bad.decode_tps = bad.prefill_tps = None
    garbled = recs[5]  # sa8295 qnn p2
    garbled.status, garbled.failure_class, garbled.verdict = "failed", "garbled", "garbled"
    garbled.message = "token soup"
    garbled.text = "asdf qwer zxcv " * 5
    recs.append(TestRecord(name="lab::health", suite="lab", device="pixel-dead", soc_model="SM8650", htp_arch="v75",
                           status="error", failure_class="quarantined", signature="lab:health",
                           message="pixel-dead: device offline", extras={"run_id": run_id}))
    recs.append(TestRecord(name="matrix/smollm2#1", suite="matrix", device="pixel-dead", soc_model="SM8650",
                           htp_arch="v75", model="smollm2", status="skipped", failure_class="quarantined",
                           message="not run: device quarantined", extras={"run_id": run_id}))
    return recs
