"""Cross-backend agreement: levels, the kitten -> goat drift warning, and dev-corpus calibration."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from harness.checks import Agreement, DriftWarning, assert_agrees, compare

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "fixtures" / "coherence" / "dev-subset.jsonl"

CPU = "A kitten is a young cat. Kittens sleep most of the day and love to play with string."
QNN_GOAT = "A goat is a young cat. Kittens sleep most of the day and love to play with string."


def test_identical_texts_agree():
    ag = compare(CPU, CPU)
    assert ag.level == "agree" and ag.similarity == 1.0 and ag.changes == ()


def test_case_punctuation_and_whitespace_do_not_matter():
    ag = compare("a kitten is a young cat kittens sleep most of the day and love to play with string",
                 CPU)
    assert ag.level == "agree"


def test_one_run_stopping_earlier_still_agrees():
    assert compare("A kitten is a young cat. Kittens sleep most", CPU).level == "agree"


def test_kitten_to_goat_is_drift_naming_the_change():
    ag = compare(QNN_GOAT, CPU)
    assert isinstance(ag, Agreement)
    assert ag.level == "drift" and 0.5 < ag.similarity < 1.0
    assert ("kitten", "goat") in ag.changes
    text = ag.describe("qnn/htp")
    assert "qnn/htp: drift" in text and "'kitten' -> 'goat'" in text
    assert QNN_GOAT in text and CPU in text


def test_unrelated_answer_disagrees():
    ag = compare("Paris is the capital of France and home of the Eiffel Tower.", CPU)
    assert ag.level == "disagree" and ag.similarity < 0.25


def test_chinese_drift():
    ag = compare("小狗是一种年幼的动物，喜欢玩耍。", "小猫是一种年幼的动物，喜欢玩耍。")
    assert ag.level == "drift" and ("猫", "狗") in ag.changes


def test_empty_texts_agree_and_type_checked():
    assert compare("", "").level == "agree"
    with pytest.raises(TypeError):
        compare(None, "x")


def test_assert_agrees_silent_on_agree():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert assert_agrees(CPU, CPU).level == "agree"


def test_assert_agrees_warns_on_drift_with_both_texts():
    with pytest.warns(DriftWarning) as record:
        ag = assert_agrees(QNN_GOAT, CPU, label="qnn/htp vs cpu/cpu")
    assert ag.level == "drift"
    w = record[0].message
    assert isinstance(w, DriftWarning) and w.agreement is ag
    assert "goat" in str(w) and QNN_GOAT in str(w) and CPU in str(w)


def test_assert_agrees_fails_on_disagree_unless_told_to_warn():
    other = "Paris is the capital of France and home of the Eiffel Tower."
    with pytest.raises(AssertionError, match="disagree"):
        assert_agrees(other, CPU)
    with pytest.warns(DriftWarning, match="disagree"):
        assert assert_agrees(other, CPU, on_disagree="warn").level == "disagree"


def test_dev_corpus_levels():
    """Correct exports never 'disagree' with fp32; saturated ones always do."""
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
    calibrated = [compare(r["text"], r["reference"]) for r in rows
                  if r["condition"] == "mul-calibrated-a16"]
    saturated = [compare(r["text"], r["reference"]) for r in rows
                 if r["condition"] == "mul-inherit-a16"]
    assert calibrated and saturated
    assert all(a.level in ("agree", "drift") for a in calibrated), [a.similarity for a in calibrated]
    assert any(a.level == "agree" for a in calibrated)
    assert all(a.level == "disagree" for a in saturated), [a.similarity for a in saturated]
