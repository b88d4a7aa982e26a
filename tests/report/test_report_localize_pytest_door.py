"""pytest's door writes a localization's JUnit properties as the lab's JUnit does: the plugin's
properties come from `extra_properties`, the same function the lab's JUnit ends with, so
`pytest suites/executorch_qnn --localize --junitxml=...` names the first op, its layer and figures
(the real run: tests/suites/test_executorch_localize_door.py)."""

from __future__ import annotations

from test_report_localize import _et_record, localization

from harness.report import extra_properties


def test_the_plugins_properties_name_the_first_departure() -> None:
    props = extra_properties(_et_record(localization()))
    assert props["localize"] == "departed" and props["localize_first_op"] == "aten_op_27", props
    assert (props["localize_layer"], props["localize_sqnr_db"], props["localize_cosine"]) == ("layers.1", "6.00", "0.7500")
    assert extra_properties(_et_record(localization(None)))["localize"] == "none"
