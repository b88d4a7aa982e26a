"""night.json's text (harness/lab/night_reports.py `night_json`): the same data json.dumps
gives, a key a line and each device's outcome a line of its own (written by json's C encoder:
an indent made it the pure-Python one, 0.15-0.25 s of a 10 000-device night's end)."""

from __future__ import annotations

import json

from harness.lab.context import DeviceOutcome
from harness.lab.night_reports import night_json
from harness.outcomes import NightOutcome


def test_night_json_is_the_same_data_with_one_line_per_outcome():
    outcomes = {name: DeviceOutcome(name) for name in ("dev0", "board.1", "phone_2")}
    outcomes["board.1"].status, outcomes["board.1"].reason = NightOutcome.QUARANTINED, 'said "no"\nthen é ✓'
    meta = {"run_id": "r", "interrupted": True, "devices": list(outcomes), "wall_s": 1.5,
            "outcomes": {k: dict(vars(v)) for k, v in outcomes.items()}, "reports": {"junit": "/o/junit.xml"},
            "counts": {"passed": 1}, "report_problems": [], "none": None}
    text = night_json(meta)
    assert json.loads(text) == json.loads(json.dumps(meta))
    assert json.loads(text)["outcomes"]["board.1"]["status"] == "quarantined"
    lines = text.splitlines()
    for name in outcomes:
        (line,) = [ln for ln in lines if ln.lstrip().startswith(f'"{name}": {{')]
        assert json.loads("{" + line.rstrip(",") + "}")[name] == meta["outcomes"][name]
    assert lines[0] == "{" and lines[-1] == "}" and '  "run_id": "r",' in lines


def test_an_empty_night_json():
    assert json.loads(night_json({"outcomes": {}, "devices": []})) == {"outcomes": {}, "devices": []}
