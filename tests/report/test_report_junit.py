import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

from junitparser import Error, Failure, JUnitXml, Skipped
from reportkit import night_records

from harness.report import write_junit


def _case_props(case):
    props = case._elem.find("properties")
    return {} if props is None else {p.get("name"): p.get("value") for p in props.findall("property")}


def test_junit_reads_cleanly_with_junitparser(tmp_path):
    paths = write_junit(night_records(), tmp_path)
    xml = JUnitXml.fromfile(str(paths["junit"]))
    suites = {s.name: s for s in xml}
    assert set(suites) == {"oneplus13", "sa8295", "pixel-dead"}
    one = suites["oneplus13"]
    assert {p.name: p.value for p in one.properties()} == {
        "device": "oneplus13", "soc": "SM8750", "arch": "v79", "transport": "adb", "run_id": "n1"}
    assert (one.tests, one.failures, one.errors, one.skipped) == (4, 1, 0, 0)
    cases = {c.name: c for c in one}
    ok = cases["smollm2::matrix[qnn]::p1"]
    assert ok.classname == "oneplus13.matrix.smollm2" and ok.is_passed and ok.time == 1.5
    assert _case_props(ok) == {"model": "smollm2", "backend_pair": "qnn", "prefill_tps": "320", "decode_tps": "40",
                               "load_s": "0.8", "verdict": "coherent"}
    assert ok.system_out == "The capital of France is Paris."
    crash = cases["smollm2::matrix[cpu]::p1"]
    (failure,) = crash.result
    assert isinstance(failure, Failure) and failure.type == "crash"
    assert failure.message == "[crash] llm_demo exited 139 (SIGSEGV)"
    assert failure.text == "load model\nSegmentation fault <core dumped> & more"
    # Hostile model output survives as text; XML-illegal characters are made visible.
    assert "<script>alert('x')</script>" in crash.system_out and "#x1B[31mred" in crash.system_out
    assert "#x00nul" in crash.system_out and "你好" in crash.system_out
    assert _case_props(crash)["signature"] == "sigsegv-in-llm-demo"
    dead = {c.name: c for c in suites["pixel-dead"]}
    assert isinstance(dead["lab::health"].result[0], Error) and dead["lab::health"].result[0].type == "quarantined"
    assert isinstance(dead["matrix/smollm2#1"].result[0], Skipped)


def test_one_file_per_device_each_a_testsuites_document(tmp_path):
    paths = write_junit(night_records(), tmp_path)
    assert sorted(k for k in paths if k.startswith("junit:")) == ["junit:oneplus13", "junit:pixel-dead", "junit:sa8295"]
    root = ET.parse(paths["junit:sa8295"]).getroot()
    assert root.tag == "testsuites" and [s.get("name") for s in root] == ["sa8295"]
    assert root.get("tests") == "4" and root.get("failures") == "1"


def test_same_shape_as_pytest_junitxml(tmp_path):
    """Element and attribute names match what pytest's own --junitxml writes."""
    (tmp_path / "test_probe.py").write_text(textwrap.dedent("""
        def test_ok(record_property):
            record_property("model", "m")
            print("out")
        def test_bad():
            assert 1 == 2
    """))
    ref = tmp_path / "pytest.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
                    "-o", "junit_logging=system-out", f"--junitxml={ref}", str(tmp_path / "test_probe.py")],
                   cwd=tmp_path, capture_output=True, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    theirs = ET.parse(ref).getroot()
    ours = ET.parse(write_junit(night_records(), tmp_path / "ours")["junit"]).getroot()
    assert theirs.tag == ours.tag == "testsuites"
    t_suite, o_suite = theirs.find("testsuite"), ours.find("testsuite")
    assert set(t_suite.attrib) <= set(o_suite.attrib)
    t_case, o_case = t_suite.find("testcase"), o_suite.find("testcase")
    assert set(t_case.attrib) <= set(o_case.attrib) | {"file", "line"}
    assert t_case.find("properties/property").attrib.keys() == o_case.find("properties/property").attrib.keys()
    t_fail = t_suite.find("testcase/failure")
    o_fail = o_suite.find("testcase/failure")
    assert set(t_fail.attrib) <= set(o_fail.attrib) | {"type"}  # pytest omits type; we always set it
    assert o_fail.get("type") and o_fail.get("message")
    assert o_suite.find("testcase/system-out") is not None and t_suite.find("testcase/system-out") is not None
