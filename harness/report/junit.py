"""JUnit XML from test records: one file per device and one merged file.

Built with the junit-xml package, in pytest's `--junitxml` shape: a `<testsuites>` root,
one `<testsuite>` per device with `<properties>` (device, SoC, arch, transport, run), test
cases with classname/name and their own `<properties>` (model, backend pair, tokens/s...),
`<failure message type>` whose text is the log excerpt, and `<system-out>` with the text
the model generated. Characters XML cannot hold (model output can hold anything) are
written as `#xNN`, as pytest does.
"""

from __future__ import annotations

import datetime as _dt
import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from junit_xml import TestCase, TestSuite

from harness.evidence import (
    EtdumpSummary,
    FloatReferenceAgreement,
    LocalizeEvidence,
    PlacementEvidence,
    Provenance,
    QnnProfile,
    TextAgreement,
    Timing,
    counted,
)
from harness.hostfiles import write_atomic
from harness.outcomes import Status
from harness.report.records import TestRecord, by_device, export_verdict_of, teacher_forced_metrics, teacher_forced_of

# XML 1.0 forbids these (tab, LF and CR are allowed); surrogates cannot be encoded.
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: object) -> str:
    return _ILLEGAL.sub(lambda m: f"#x{ord(m.group()):02X}", "" if text is None else str(text))


def _fmt(value: float | None) -> str | None:
    return None if value is None else f"{value:.3f}".rstrip("0").rstrip(".")


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def timing_label(rec: TestRecord) -> str:
    """" (emulator)" after a time measured on an emulated HTP (not device speed), else ""."""
    timing = rec.evidence.get(Timing)
    return " (emulator)" if timing is not None and timing.emulated else ""


def extra_properties(rec: TestRecord) -> dict[str, str]:
    """Properties from a record's extras that both doors write (pytest's plugin and the lab's
    JUnit): what its times mean and its ETDump summary."""
    timing = rec.evidence.get(Timing)
    props: dict[str, str | None] = {"timing": None if timing is None else timing.clock.value}
    et = rec.evidence.get(EtdumpSummary)
    if et is not None:
        props.update({"etdump_calls": _str(et.calls), "etdump_ops": _str(et.ops),
                      "etdump_delegated": _str(et.delegated), "etdump_unit": et.unit})
        props["etdump_backends"] = ",".join(et.backends)
        props["etdump_top_not_delegated"] = et.slowest_not_delegated
    qnn = rec.evidence.get(QnnProfile)  # runners/executorch/qnn_profile.py's view; emulator cycles say so
    if qnn is not None and qnn.profiled:
        props.update({"etdump_qnn_ops": str(qnn.qnn_ops), "etdump_qnn_unit": qnn.unit_label,
                      "etdump_qnn_accelerator_cycles": _fmt(qnn.accelerator_cycles)})
    props.update(float_reference_properties(rec))
    props.update(placement_properties(rec))
    props.update(localize_properties(rec))  # pytest's door too: `pytest --localize` names the first op in its JUnit
    return {k: xml_safe(v) for k, v in props.items() if v}


def float_reference_properties(rec: TestRecord) -> dict[str, str | None]:
    """A QNN cell's agreement with its export's float model (checks/float_reference.py)."""
    ag = rec.evidence.get(FloatReferenceAgreement)
    if ag is None:
        return {}
    return {"float_reference": ag.verdict, "float_reference_file": ag.reference,
            "float_reference_prompts": str(len(ag.prompts)),
            "float_reference_median_kl": _fmt6(ag.median_kl), "float_reference_worst_kl": _fmt6(ag.worst_kl),
            "float_reference_median_flip_share": _fmt(ag.median_flip_share),
            "float_reference_worst_flip_share": _fmt(ag.worst_flip_share),
            "float_reference_median_nll_gap": _fmt6(ag.median_nll_gap),
            "float_reference_worst_nll_gap": _fmt6(ag.worst_nll_gap)}


def placement_properties(rec: TestRecord) -> dict[str, str | None]:
    """Where the case ran (tier, the runtime's QAIRT, the bytes' sha256) and, for a QNN program,
    its placement: delegates and the ops on the CPU, those beyond the expected ones."""
    props: dict[str, str | None] = {}
    prov = rec.evidence.get(Provenance)
    if prov is not None:
        props.update({"tier": prov.tier.value, "qairt": prov.qairt, "program_sha256": prov.program_sha256,
                      "binaries_sha256": ",".join(prov.binaries_sha256)})
    placed = rec.evidence.get(PlacementEvidence)
    if placed is not None:
        props["placement"] = placed.summary
        props["placement_unexpected_cpu_ops"] = counted(placed.unexpected)
        if placed.time_share:
            props["placement_time_share"] = ", ".join(f"{k} {v:.3f}" for k, v in sorted(placed.time_share.items()))
        if placed.runtime_qnn_inits is not None:  # llm_demo's own word on its QNN plugin kernels
            props["placement_runtime_qnn_inits"] = str(placed.runtime_qnn_inits)
    return props


def case_properties(rec: TestRecord) -> dict[str, str]:
    props = {
        "model": rec.model, "backend_pair": rec.backend_pair.name if rec.backend_pair else None, "prefill_tps": _fmt(rec.prefill_tps),
        "decode_tps": _fmt(rec.decode_tps), "load_s": _fmt(rec.load_s), "verdict": rec.verdict,
        "failure_class": rec.failure_class.value if rec.failure_class else None, "signature": rec.signature,
        "attempts": str(rec.attempts) if rec.attempts != 1 else None, "flaky": "true" if rec.flaky else None,
    }
    ag = rec.evidence.get(TextAgreement)
    if ag is not None:
        props.update({"agreement": ag.level, "agreement_similarity": _fmt(ag.similarity),
                      "agreement_reference": ag.reference})
    tf = teacher_forced_of(rec)
    if tf is not None:
        ctx = tf.get("context") or {}
        props.update({
            "teacher_forced": tf["verdict"],
            "teacher_forced_pair": f"{tf.get('b', '')} vs {tf.get('a', '')}",
            "teacher_forced_disagreements": f"{tf.get('disagreements', 0)}/{tf.get('counted_steps', 0)}",
            "teacher_forced_first_disagreement": (None if tf.get("first_disagreement") is None
                                                  else str(tf["first_disagreement"])),
            "teacher_forced_context": (f"{ctx.get('before', '')}[{ctx.get('token', '')}]{ctx.get('after', '')}"
                                       if ctx else None),
            "teacher_forced_mean_kl": _fmt6(tf.get("mean_kl")), "teacher_forced_nll_a": _fmt6(tf.get("nll_a")),
            "teacher_forced_nll_b": _fmt6(tf.get("nll_b")),
            "teacher_forced_worst_max_abs_diff": _fmt(tf.get("worst_max_abs_diff")),
            "teacher_forced_note": tf.get("exclusion_note"),
        })
    extra = rec.extras.get("junit_properties")  # a producer's own facts (the export stage's cache use)
    if isinstance(extra, dict):
        props.update({str(k): None if v is None else str(v) for k, v in extra.items()})
    ev = export_verdict_of(rec)
    if ev is not None:
        props["export_verdict"] = ev["verdict"]
        for ln in ev.get("lines") or []:
            key = "export_" + str(ln.get("instrument", "")).replace("-", "_") + (f"_{ln['pair']}" if ln.get("pair") else "")
            props[key] = f"{ln.get('verdict')}: {ln.get('summary', '')}"
        metrics = teacher_forced_metrics(rec)
        props.update({"export_tf_median_kl": _fmt6(metrics["tf_mean_kl"]), "export_tf_worst_kl": _fmt6(metrics["tf_worst_kl"]),
                      "export_tf_median_flip_share": _fmt(metrics["tf_disagree_rate"]),
                      "export_tf_median_nll_gap": _fmt6(metrics["tf_nll_gap"])})
    return {**{k: xml_safe(v) for k, v in props.items() if v}, **extra_properties(rec)}


def localize_properties(rec: TestRecord) -> dict[str, str | None]:
    """The localization's verdict (harness.checks.localize): the first op under the threshold and
    the ops after it; only the outcome (and why) when none departed."""
    ev = rec.evidence.get(LocalizeEvidence)
    if ev is None:
        return {}
    r, f = ev.result, ev.result.first
    props: dict[str, str | None] = {"localize": r.outcome.value, "localize_threshold_db": _fmt(r.threshold_db),
                                    "localize_format": r.format, "localize_cell": ev.cell, "localize_reason": r.reason}
    if f is not None:
        props.update({"localize_first_op": f.node, "localize_target": f.target, "localize_layer": f.layer,
                      "localize_sqnr_db": f"{f.sqnr_db:.2f}", "localize_cosine": f"{f.cosine:.4f}",
                      "localize_saturation": f"{f.saturation:.4f}",
                      "localize_follows": ", ".join(f"{o.node} {o.sqnr_db:.1f} dB" for o in r.following)})
    return props


def _fmt6(value: float | None) -> str | None:
    return None if value is None else f"{value:.6f}".rstrip("0").rstrip(".") or "0"


def suite_properties(device: str, records: list[TestRecord]) -> dict[str, str]:
    first = records[0] if records else None
    props = {"device": device}
    if first is not None:
        props.update({
            "soc": first.soc_model, "arch": first.htp_arch,
            "transport": first.lab_run.transport or "", "run_id": first.run_id or "",
        })
    return {k: xml_safe(v) for k, v in props.items() if v}


def _classname(rec: TestRecord) -> str:
    return ".".join(p for p in (rec.device, rec.suite, rec.model) if p)


def _case(rec: TestRecord) -> TestCase:
    case = TestCase(
        name=xml_safe(rec.name), classname=xml_safe(_classname(rec)), elapsed_sec=rec.duration_s,
        stdout=xml_safe(rec.text) or None,
        timestamp=_dt.datetime.fromtimestamp(rec.started_at, _dt.UTC).isoformat(),
    )
    cls = rec.cause
    message = xml_safe(f"[{cls}] {rec.message}".strip())
    if rec.status is Status.FAILED:
        case.add_failure_info(message=message, output=xml_safe(rec.log_excerpt) or None, failure_type=xml_safe(cls))
    elif rec.status is Status.ERROR:
        case.add_error_info(message=message, output=xml_safe(rec.log_excerpt) or None, error_type=xml_safe(cls))
    elif rec.status is Status.SKIPPED:
        case.add_skipped_info(message=xml_safe(rec.message) or "skipped")
    return case


def suite_element(device: str, records: list[TestRecord]) -> ET.Element:
    suite = TestSuite(
        name=xml_safe(device), test_cases=[_case(r) for r in records], hostname=socket.gethostname(),
        timestamp=_dt.datetime.fromtimestamp(min((r.started_at for r in records), default=0),
                                             _dt.UTC).isoformat(),
        properties=suite_properties(device, records),
    )
    elem: ET.Element = suite.build_xml_doc()
    # junit-xml has no per-case properties; pytest writes them first inside <testcase>.
    for case_elem, rec in zip(elem.findall("testcase"), records):
        props = case_properties(rec)
        if props:
            holder = ET.Element("properties")
            for k, v in props.items():
                ET.SubElement(holder, "property", {"name": k, "value": v})
            case_elem.insert(0, holder)
    return elem


def junit_document(records: Iterable[TestRecord]) -> str:
    """A `<testsuites>` document with one suite per device (device order of first appearance)."""
    groups = by_device(records)
    root = ET.Element("testsuites")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    for device, recs in groups.items():
        elem = suite_element(device, recs)
        root.append(elem)
        for k in totals:
            totals[k] += int(elem.get(k, "0"))
        seconds += float(elem.get("time", "0"))
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", f"{seconds:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


_WRITERS = 8


def write_junit(records: Iterable[TestRecord], out_dir: Path) -> dict[str, Path]:
    """out_dir/junit.xml (all devices) and out_dir/junit/<device>.xml. Returns the paths by key
    "junit" and "junit:<device>"."""
    records = list(records)
    out_dir = Path(out_dir)
    (out_dir / "junit").mkdir(parents=True, exist_ok=True)
    paths = {"junit": out_dir / "junit.xml"}
    write_atomic(paths["junit"], junit_document(records))
    per_device = {device: (out_dir / "junit" / f"{device}.xml", recs) for device, recs in by_device(records).items()}
    # A few writes at once: each is fsync'd, and concurrent fsyncs share the file system's
    # journal commits (300 devices: 3.4 s one by one, 0.17 s eight at a time on ext4), so a
    # stopped 1 000-device night still reports within its 2 s.
    with ThreadPoolExecutor(max_workers=_WRITERS, thread_name_prefix="junit") as ex:
        list(ex.map(lambda item: write_atomic(item[0], junit_document(item[1])), per_device.values()))
    paths.update({f"junit:{device}": path for device, (path, _) in per_device.items()})
    return paths
