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

from harness.evidence import fmt3
from harness.hostfiles import write_atomic
from harness.outcomes import Status
from harness.report.records import TestRecord, by_device

# XML 1.0 forbids these (tab, LF and CR are allowed); surrogates cannot be encoded.
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: object) -> str:
    return _ILLEGAL.sub(lambda m: f"#x{ord(m.group()):02X}", "" if text is None else str(text))


def extra_properties(rec: TestRecord) -> dict[str, str]:
    """Every family's own properties (harness.evidence: each says its own), as both doors write
    them (pytest's plugin and the lab's JUnit)."""
    props: dict[str, str | None] = {}
    for ev in rec.evidence:
        props.update(ev.junit())
    return {k: xml_safe(v) for k, v in props.items() if v}


def case_properties(rec: TestRecord) -> dict[str, str]:
    props = {
        "model": rec.model, "backend_pair": rec.backend_pair.name if rec.backend_pair else None, "prefill_tps": fmt3(rec.prefill_tps),
        "decode_tps": fmt3(rec.decode_tps), "load_s": fmt3(rec.load_s), "verdict": rec.verdict,
        "failure_class": rec.failure_class.value if rec.failure_class else None, "signature": rec.signature,
        "attempts": str(rec.attempts) if rec.attempts != 1 else None, "flaky": "true" if rec.flaky else None,
    }
    return {**{k: xml_safe(v) for k, v in props.items() if v}, **extra_properties(rec)}


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
        case_elem.set("time", f"{rec.duration_s or 0.0:.3f}")  # junit-xml leaves a 0 out: every case has one
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
