"""Coherence judge: dev-set accuracy, one test per rule, Chinese, assert_coherent, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness.checks.coherence import Tally, Thresholds, assert_coherent, judge, load_rows, main

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "fixtures" / "coherence" / "dev-subset.jsonl"
SHARED_DEV = REPO / ".." / "shared" / "corpus" / "coherence-dev.jsonl"


def _score(path: Path) -> tuple[Tally, list[str]]:
    tally, wrong = Tally(), []
    for row in load_rows(path):
        v = judge(row.text, prompt=row.prompt, reference=row.reference)
        tally.add(row.label, v.verdict)
        if row.label == "coherent" and v.verdict == "garbled":
            wrong.append(f"false alarm: {row.text[:80]!r} {v.reasons}")
    return tally, wrong


# -- accuracy on labelled real outputs ------------------------------------------------------

def test_fixture_subset_no_false_alarm_and_97pct_caught():
    tally, wrong = _score(FIXTURE)
    assert tally.coherent >= 30 and tally.garbled >= 30
    assert tally.false_alarms == 0, wrong
    assert tally.caught / tally.garbled >= 0.97, tally.summary()


@pytest.mark.skipif(not SHARED_DEV.exists(), reason="../shared/corpus/coherence-dev.jsonl not present")
def test_full_dev_set_no_false_alarm_and_97pct_caught():
    tally, wrong = _score(SHARED_DEV)
    assert tally.false_alarms == 0, wrong
    assert tally.caught / tally.garbled >= 0.97, tally.summary()


# -- one test per rule ---------------------------------------------------------------------------

PROMPT = "Explain why the sky is blue."
REF = ("The sky appears blue because of a process called Rayleigh scattering, which occurs when "
       "light encounters molecules in the atmosphere and interacts with them.")
GOOD = ("The sky looks blue because sunlight is scattered by the molecules of the air, and blue "
        "light is scattered much more strongly than red light.")


def _reasons(v) -> str:
    return " | ".join(v.reasons)


def test_good_answer_is_coherent_with_no_reason():
    v = judge(GOOD, prompt=PROMPT, reference=REF)
    assert v.verdict == "coherent" and v.reasons == []
    assert v.scores["relevance"] > 0.25


@pytest.mark.parametrize("text", ["", "   \n\t ", "... --- !!!"])
def test_empty(text):
    v = judge(text)
    assert v.verdict == "garbled" and "empty" in _reasons(v)


def test_control_characters():
    v = judge("The sky is blue\x10 because of scattering\x1f.")
    assert v.verdict == "garbled" and "control characters" in _reasons(v) and "U+0010" in _reasons(v)


def test_tab_and_newlines_are_not_control_characters():
    assert judge("Steps:\n\t1. Mix the flour.\r\n\t2. Bake it.").coherent


def test_replacement_character_inside_text():
    v = judge("The sky is bl\ufffd\ufffdue because of scattering.")
    assert v.verdict == "garbled" and "U+FFFD" in _reasons(v)


def test_replacement_character_at_the_very_end_is_a_cut_character():
    assert judge("Here is a smiley for you \ufffd").coherent


def test_token_soup_of_subwords():
    v = judge("hadn didn wasnhet isnreating didnchedStay Donnt wasnT isniah hadnderze "
              "wasniahn doesnreat wechanHi")
    assert v.verdict == "garbled" and "token soup" in _reasons(v)


def test_token_soup_of_real_words_without_grammar():
    v = judge("McDonald pity jazz spreadsheet telomeres refinery thousands defeat Issue conversion "
              "Delete disconnected boundaries France preserve clumps theorist outer adjusted")
    assert v.verdict == "garbled" and "function words" in _reasons(v)


def test_a_long_list_needs_no_function_words():
    fruits = ["Apple", "Banana", "Cherry", "Grape", "Mango", "Orange", "Peach", "Pear", "Plum",
              "Kiwi", "Lemon", "Lime", "Papaya", "Melon", "Apricot", "Fig"]
    text = "Here you go:\n" + "\n".join(f"{i}. {f} (sweet)" for i, f in enumerate(fruits, 1))
    assert judge(text, prompt="List sixteen fruits.").coherent


def test_repetition_loop():
    v = judge("France, Italy, Spain, Italy, Spain, Italy, Italy, Italy, Italy, Italy, Italy, Italy, "
              "Italy, Italy, Italy", prompt="What is the capital of France?")
    assert v.verdict == "garbled" and "repetition loop" in _reasons(v)


def test_loop_of_symbols_and_letters():
    v = judge("I can help you with any-\n\nE\n\nB\n\nE\n\nB\n\nE\n\nB\n\nE\n\nB\n\nE\n\nB\n\nE\n\nB")
    assert v.verdict == "garbled" and "repetition loop" in _reasons(v)


def test_markdown_table_is_not_a_loop():
    text = ("| Trait | Cats | Dogs |\n| --- | --- | --- |\n| Size | Small | Varies |\n"
            "| Needs | Independent | Social |")
    assert judge(text, prompt="Compare cats and dogs in a table.").coherent


def test_counting_is_not_a_loop_nor_a_mangled_chain():
    assert judge("1-2-3-4-5-6-7-8-9-10", prompt="Count from 1 to 10.").coherent
    assert judge("1, 2, 3, 4, 5, 6, 7, 8, 9, 10", prompt="Count from 1 to 10.").coherent


def test_repeated_passage_adds_suspicion():
    text = ("Original sentence: the example description has more than one word here.\n"
            "Original sentence: the example description has more than one word here.")
    v = judge(text)
    assert "repeated passage" in _reasons(v)


def test_offtopic_sharing_nothing_with_prompt_and_reference_is_garbled():
    text = ('Here\'s a description of a warm-hearted person:\n\n"A simple yet delicious meal with no '
            'special sauce or spices is just as exciting and colorful."\n\nI can only offer you '
            "another example of describing a happy-alone person.")
    ref = ("The sun was shining brightly as I stepped onto the sandy shore of the beach. The sound "
           "of waves crashing against the rocks seemed to lull me into a peaceful sleep.")
    v = judge(text, prompt="Describe a sunny day at the beach.", reference=ref)
    assert v.verdict == "garbled" and "off-topic" in _reasons(v)
    # Without prompt and reference there is nothing to be off-topic from: fluent text passes.
    assert judge(text).coherent


def test_offtopic_alone_against_a_short_reference_only_adds_suspicion():
    v = judge("Welcome aboard! We're thrilled to have you join the team and can't wait to work "
              "together.", prompt="Write a friendly greeting for a new colleague.",
              reference="Hello there! I'm here to help with whatever you need today.")
    assert v.coherent and "off-topic" in _reasons(v)


def test_invented_words_and_mangled_tokens_add_up():
    text = ("I am here to help you, I'm here to assist you with any-one-alone-only-special-post_"
            "no-longer-pre-empty_post_nonexcurricula_@Nonexcurricula_@nonexcurricula_")
    v = judge(text)
    assert v.verdict == "garbled"
    assert "invented words: nonexcurricula" in _reasons(v) and "mangled tokens" in _reasons(v)


def test_one_invented_word_is_not_enough():
    v = judge("The waves that roll high in the sunlit day, a gentle breeze carries tales of the "
              "sunbeamed shore.", prompt="Write a short poem about the sea.")
    assert v.coherent and "sunbeamed" in _reasons(v)


def test_fragment_lines():
    text = "I can only explain this as: no more than\n\nNo\n\nThis\n\nThe\n\n@\n\nWhat a\n\nYour"
    v = judge(text)
    assert v.verdict == "garbled" and "fragment lines" in _reasons(v)


def test_text_cut_mid_sentence_or_mid_word_is_not_garbled():
    v = judge("The mitochondria is the powerhouse of the cell, producing most of the chemical ener",
              prompt="What is the powerhouse of the cell?")
    assert v.coherent and v.reasons == []


def test_code_block_is_not_mangled():
    text = ("Here is a simple Python function:\n\n```python\ndef add_numbers(first_value, "
            "second_value):\n    return first_value + second_value\n```\n\nIt returns the sum.")
    v = judge(text, prompt="Write a Python function that adds two numbers.")
    assert v.coherent and "mangled" not in _reasons(v)


def test_hashtags_links_and_emoji_are_not_invented_words():
    text = ("Nothing beats the first cup of coffee in the morning! ☕️ #coffee #MorningVibes "
            "@StarbucksCoffee https://example.com/coffee")
    assert judge(text, prompt="Write a tweet about coffee.").reasons == []


def test_thresholds_can_be_overridden():
    text = "The sky is blue because of scattering, said the sunbeamed scientist."
    assert judge(text).coherent
    strict = replace(Thresholds(), nonword_weight=1.0)   # 'sunbeamed' is in no word list
    assert judge(text, thresholds=strict).verdict == "garbled"


# -- expectations ---------------------------------------------------------------------------

def test_expectation_met_by_any_word_including_plural():
    v = judge("Kittens are young cats that love to play.", expect_any=["cat", "kitten"])
    assert v.coherent


def test_expectation_matching_is_word_based():
    assert not judge("Try to catch the ball.", expect_any=["cat"]).coherent
    assert judge("Scrambled eggs need butter.", expect_any=["scramble"]).coherent
    assert judge("2 + 2 = 4.", expect_any=["4"]).coherent
    assert judge("The answer is Paris, France.", expect_any=["paris, france"]).coherent


def test_expectation_missing_is_its_own_reason():
    v = judge("A goat is a farm animal that eats grass.", expect_any=["cat", "kitten"])
    assert v.verdict == "garbled"
    assert v.reasons == ["expectation: none of ['cat', 'kitten'] appear"]


def test_expectation_in_chinese():
    assert judge("猫是一种可爱的动物。", expect_any=["猫"]).coherent
    assert not judge("狗是一种忠诚的动物。", expect_any=["猫"]).coherent


# -- Chinese -----------------------------------------------------------------------------------

ZH_COHERENT = [
    ("Describe a cat in two sentences.", "猫是一种小型的哺乳动物，喜欢睡觉和玩耍。它们通常很爱干净，会用舌头梳理毛发。", None),
    ("介绍一下长城。", "长城是中国古代的军事防御工程，东起山海关，西至嘉峪关，全长两万多公里。它是世界上最著名的建筑之一。",
     "长城是中国古代修建的防御工程，是世界文化遗产。"),
    ("介紹一下台北。", "台北是台灣的首都，位於台灣北部，是政治、經濟與文化的中心。", None),
    ("什么是Python？", "Python 是一种流行的编程语言，语法简洁，适合初学者，也广泛用于数据分析和人工智能。", None),
    ("写一首关于月亮的诗。", "床前明月光，\n疑是地上霜。\n举头望明月，\n低头思故乡。", None),
    ("天空为什么是蓝色的？", "天空呈现蓝色是因为瑞利散射：阳光穿过大气时，波长较短的蓝光被空气分子散射得更多，所以我们看到的天空", None),
]


@pytest.mark.parametrize("prompt,text,ref", ZH_COHERENT)
def test_chinese_coherent(prompt, text, ref):
    v = judge(text, prompt=prompt, reference=ref)
    assert v.coherent, v.reasons


@pytest.mark.parametrize("text,rule", [
    ("的的的的的的的的的的的的的的的的的的的的", "repetition loop"),
    ("猫是一种猫是一种猫是一种猫是一种猫是一种猫是一种", "repetition loop"),
    ("齉爨麤鱻龘靐齾厵灪爩龖𪚥", "token soup"),
    ("猫是一种\ufffd\ufffd动物，喜欢\ufffd睡觉。", "U+FFFD"),
])
def test_chinese_garbled(text, rule):
    v = judge(text)
    assert v.verdict == "garbled" and rule in _reasons(v)


def test_chinese_offtopic_against_reference():
    ref = "长城是中国古代修建的军事防御工程，东起山海关，西至嘉峪关，全长两万多公里，是世界文化遗产。"
    text = "我可以帮助你回答其他问题。这里是另一个例子：你好，朋友！请告诉我你的名字和爱好。"
    v = judge(text, prompt="介绍一下长城。", reference=ref)
    assert v.verdict == "garbled" and "off-topic" in _reasons(v)


# -- assert_coherent ------------------------------------------------------------------------------

def test_assert_coherent_passes_and_returns_verdict():
    assert assert_coherent(GOOD, prompt=PROMPT, reference=REF).coherent


def test_assert_coherent_message_names_rule_and_quotes_text():
    text = "Italy, Spain, Italy, Spain, Italy, Spain, Italy, Spain, Italy, Spain, Italy"
    with pytest.raises(AssertionError) as exc:
        assert_coherent(text, prompt="What is the capital of France?", expect_any=["Paris"])
    msg = str(exc.value)
    assert "repetition loop" in msg and "expectation" in msg
    assert "Italy, Spain, Italy" in msg and "capital of France" in msg


def test_judge_rejects_non_string():
    with pytest.raises(TypeError, match="str"):
        judge(None)


# -- CLI -----------------------------------------------------------------------------------------

def _write(tmp_path: Path, rows: list, name: str = "rows.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n"
                         for r in rows), encoding="utf-8")
    return p


ROWS = [
    {"prompt": PROMPT, "text": GOOD, "reference": REF, "label": "coherent"},
    {"prompt": PROMPT, "text": "wasn didn hadnreating isniah didnched wasnT Donnt doesnreat isnendum hadnze",
     "label": "garbled"},
    {"prompt": "介绍一下长城。", "text": "长城是中国古代的军事防御工程，全长两万多公里。"},
]


def test_cli_json_is_one_object_per_row_in_order_and_nothing_else(tmp_path):
    path = _write(tmp_path, ROWS)
    out = subprocess.run([sys.executable, "-m", "harness.checks.coherence", str(path), "--json"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == len(ROWS)
    objs = [json.loads(line) for line in lines]
    assert [o["verdict"] for o in objs] == ["coherent", "garbled", "coherent"]
    assert [o["line"] for o in objs] == [1, 2, 3]
    for o in objs:
        assert isinstance(o["reasons"], list) and o["verdict"] in ("coherent", "garbled")
    assert objs[1]["reasons"] and "token soup" in objs[1]["reasons"][0]


def test_cli_text_mode_prints_verdicts_and_accuracy(tmp_path, capsys):
    assert main([str(_write(tmp_path, ROWS))]) == 0
    out = capsys.readouterr().out
    assert "line 1: coherent  ok" in out and "line 2: garbled  ok" in out
    assert "accuracy: 100.0%" in out and "false alarms: 0/1" in out and "garbled caught: 1/1" in out


def test_cli_reports_wrong_verdicts(tmp_path, capsys):
    rows = [{"text": GOOD, "label": "garbled"}]
    assert main([str(_write(tmp_path, rows))]) == 0
    out = capsys.readouterr().out
    assert "WRONG (label garbled)" in out and "garbled caught: 0/1" in out


def test_cli_expect_any_from_rows(tmp_path, capsys):
    rows = [{"text": "A goat is a farm animal that eats grass.", "expect_any": ["cat", "kitten"]}]
    assert main([str(_write(tmp_path, rows)), "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["verdict"] == "garbled" and "expectation" in obj["reasons"][0]


@pytest.mark.parametrize("content,needle", [
    (None, "no such file"),
    (['{"text": "ok"}', "{not json"], ":2: not valid JSON"),
    (['["a list"]'], ":1: expected a JSON object"),
    (['{"prompt": "p"}'], ":1: key 'text'"),
    (['{"text": "hi", "label": "maybe"}'], "label 'maybe'"),
    (['{"text": "hi", "expect_any": [1]}'], "'expect_any' must be a list of strings"),
    ([], "no rows"),
])
def test_cli_bad_file_exits_2_with_message(tmp_path, capsys, content, needle):
    path = tmp_path / "missing.jsonl" if content is None else _write(tmp_path, content)
    assert main([str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert needle in captured.err and "Traceback" not in captured.err


def test_cli_bad_file_as_subprocess_has_no_traceback(tmp_path):
    path = _write(tmp_path, ["{oops"])
    out = subprocess.run([sys.executable, "-m", "harness.checks.coherence", str(path)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 2 and "not valid JSON" in out.stderr and "Traceback" not in out.stderr


def test_heldout_real_export_outputs_no_false_alarm_and_every_loop_caught() -> None:
    """Prompts outside the dev corpus, answered by the real quantized SmolLM2 export."""
    path = Path(__file__).resolve().parents[2] / "fixtures" / "coherence" / "heldout-smollm2-npu16.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    scored = [r for r in rows if r["label"] in ("coherent", "garbled")]
    assert len(scored) == 19
    verdicts = {r["prompt"]: judge(r["text"], prompt=r["prompt"]).verdict for r in scored}
    false_alarms = [r["prompt"] for r in scored if r["label"] == "coherent" and verdicts[r["prompt"]] != "coherent"]
    missed = [r["prompt"] for r in scored if r["label"] == "garbled" and verdicts[r["prompt"]] != "garbled"]
    assert not false_alarms and not missed, (false_alarms, missed)
