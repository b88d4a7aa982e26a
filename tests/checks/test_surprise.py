"""Reference-model surprise: one optional signal for the coherence check, never a verdict alone."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from harness.checks import ReferenceUnavailable, Scorer, Surprise
from harness.checks.coherence import judge, main
from harness.errors import HarnessError

pytestmark = pytest.mark.slow  # tens of seconds: tests/conftest.py starts slow files early

REPO = Path(__file__).resolve().parents[2]
MODEL_CONFIG = REPO / ".." / "shared" / "models" / "smollm2-135m-instruct-mnn-npu16" / "config.json"

FLUENT = "A plane stays in the air because its wings push air down and the air pushes the wings up."


def _surprise(gaps: list[float]) -> Surprise:
    return Surprise([f"t{i}" for i in range(len(gaps))], [], gaps)


def test_surprise_alone_never_decides():
    v = judge(FLUENT, surprise=_surprise([9.0] * 10 + [0.0]))
    assert v.coherent
    assert any("surprising to the reference model: 10 tokens" in r and "(+0.70)" in r for r in v.reasons)


def test_surprise_adds_to_other_signs():
    text = "Fish breathe with gills called photosyntze, which take oxygen from the water around them."
    assert judge(text).coherent                        # one non-word: 0.6
    v = judge(text, surprise=_surprise([0.0, 7.0, 6.5, 0.0, 0.0]))   # the non-word's pieces
    assert v.verdict == "garbled" and "surprising" in " ".join(v.reasons)


def test_small_gaps_and_the_last_token_do_not_count():
    assert judge(FLUENT, surprise=_surprise([2.9, 3.0, 0.0, 12.0])).reasons == []


def test_sparse_and_full_forms_round_trip():
    s = Surprise(["A", " plane", "'s", " to"], [0.1, 0.2, 1.0, 8.0], [0.0, 0.0, 2.5, 7.5])
    sparse = Surprise.from_json(json.loads(json.dumps(s.to_sparse())))
    assert sparse.gap == [0.0, 0.0, 2.5, 7.5] and sparse.surprising(6.0) == [(3, " to", 7.5)]
    assert Surprise.from_json(s.to_json()) == s


@pytest.mark.parametrize("obj", [{}, {"tokens": ["a"], "gap": [1.0, 2.0]}, {"n": 2, "over": [[5, "x", 1.0]]},
                                 {"tokens": ["a"], "gap": ["high"]}])
def test_malformed_scores_are_a_clear_error(obj):
    with pytest.raises(HarnessError, match="surprise scores need"):
        Surprise.from_json(obj)


def test_cli_uses_scores_carried_by_rows_and_names_a_bad_one(tmp_path, capsys):
    good = {"prompt": "Why do fish have gills?",
            "text": "Fish breathe with gills called photosyntze, which take oxygen from the water.",
            "surprise": {"n": 5, "over": [[1, " photos", 7.0], [2, "yntze", 6.5]]}}
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "surprise": None}) + "\n")
    assert main([str(path), "--json"]) == 0
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first["verdict"] == "garbled" and second["verdict"] == "coherent"
    path.write_text(json.dumps({**good, "surprise": {"n": 1}}) + "\n")
    assert main([str(path)]) == 2
    assert f"{path}:1: key 'surprise'" in capsys.readouterr().err


def test_missing_reference_config_is_a_clear_error(tmp_path, capsys):
    pytest.importorskip("MNN.llm")
    with pytest.raises(ReferenceUnavailable, match="no such config"):
        Scorer(tmp_path / "nope.json")
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"prompt": "Hi?", "text": "Hello."}) + "\n")
    assert main([str(path), "--reference-model", str(tmp_path / "nope.json")]) == 2
    assert "no such config" in capsys.readouterr().err


@pytest.mark.skipif(not MODEL_CONFIG.exists(), reason="../shared/models/smollm2-135m-instruct-mnn-npu16 not present")
def test_real_reference_scores_its_own_greedy_answer_unsurprising_and_a_saturated_one_surprising():
    pytest.importorskip("MNN.llm", reason="the optional `mnn` package is not installed")
    rows = [json.loads(line) for line in
            (REPO / "fixtures" / "coherence" / "new-prompts-mnn.jsonl").read_text().splitlines()]
    own = next(r for r in rows if r["condition"] == "export-cpu-greedy"
               and r["prompt"] == "Describe a volcano in two sentences.")
    saturated = next(r for r in rows if r["condition"] == "mul-export-a16-block0-greedy"
                     and r["prompt"] == "How do I make a cup of tea?")   # "You are a help me make..."
    scorer = Scorer(MODEL_CONFIG)
    s_own = scorer.score(own["prompt"], own["text"])
    assert len(s_own.tokens) > 20 and statistics.median(s_own.gap) == 0.0 and max(s_own.gap) < 3.0
    s_sat = scorer.score(saturated["prompt"], saturated["text"])
    assert s_sat.surprising(6.0), list(zip(s_sat.tokens, s_sat.gap))


class _FakeLlm:
    """Just enough of MNN.llm for Scorer.score: logits favour token 1; token 9 is half a character."""

    def __init__(self) -> None:
        import numpy
        self._logits = numpy.array([0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -3.0])

    def reset(self) -> None:
        pass

    def apply_chat_template(self, prompt: str) -> str:
        return prompt

    def tokenizer_encode(self, text: str) -> list[int]:
        return [1, 9] if text == "answer" else [0]

    def tokenizer_decode(self, token: int) -> str:
        if token == 9:
            raise UnicodeDecodeError("utf-8", b"\xd7", 0, 1, "unexpected end of data")
        return f"t{token}"

    def forward(self, ids: list[int]):
        logits = self._logits

        class _Var:
            def read(self):
                return logits
        return _Var()


def test_gap_is_distance_below_the_best_token_and_byte_pieces_are_named_by_id():
    import numpy
    scorer = object.__new__(Scorer)
    scorer._np, scorer._llm = numpy, _FakeLlm()
    s = scorer.score("prompt", "answer\n")        # the final newline is EOS, not scored
    assert s.tokens == ["t1", "<token 9>"]
    assert s.gap == [0.0, 8.0] and s.nll[0] < s.nll[1]


def test_reference_model_scores_of_the_fixture_add_no_false_alarm_and_lose_no_catch():
    """Scores stored by benchmarks (new-prompts-mnn.surprise.jsonl), so no engine is needed here."""
    fixture = REPO / "fixtures" / "coherence" / "new-prompts-mnn.jsonl"
    rows = [json.loads(line) for line in fixture.read_text().splitlines()]
    sidecar = fixture.with_suffix(".surprise.jsonl")
    scores = {o["line"]: Surprise.from_json(o) for o in map(json.loads, sidecar.read_text().splitlines())}
    assert len(scores) >= 560
    gained = 0
    for line, s in scores.items():
        r = rows[line - 1]
        if r["label"] == "unknown":
            continue
        plain = judge(r["text"], prompt=r["prompt"], reference=r.get("reference"))
        with_model = judge(r["text"], prompt=r["prompt"], reference=r.get("reference"), surprise=s)
        if r["label"] == "coherent":   # the model adds no false alarm of its own
            assert with_model.coherent or not plain.coherent, (r["text"][:80], with_model.reasons)
        elif plain.verdict == "garbled":
            assert with_model.verdict == "garbled"
        else:
            gained += with_model.verdict == "garbled"
    assert gained >= 1   # 'Pombread' (gaps 11.9, 7.2) is caught only with the model
