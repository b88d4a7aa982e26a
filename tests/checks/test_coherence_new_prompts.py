"""Coherence on prompts outside the dev corpus: the saturation fault's fluent outputs, short loops.

fixtures/coherence/new-prompts-mnn.jsonl holds 672 real `llm_demo` outputs of the SmolLM2 export
(the fault made for real by benchmarks/coherence_generate.py), labelled by the rule in
docs/coherence.md. `tune` rows were looked at while the rules were written; `heldout` and `fresh`
rows were labelled before the checker ran on them (their first-sight false alarms were then
fixed); `first-sight` rows were labelled and committed, then judged once by the frozen checker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.checks.coherence import Tally, judge

REPO = Path(__file__).resolve().parents[2]
NEW = REPO / "fixtures" / "coherence" / "new-prompts-mnn.jsonl"
DEV_SUBSET = REPO / "fixtures" / "coherence" / "dev-subset.jsonl"
SHARED_DEV = REPO / ".." / "shared" / "corpus" / "coherence-dev.jsonl"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _reasons(v) -> str:
    return " | ".join(v.reasons)


# -- the outputs the issue names -------------------------------------------------------------

def test_fluent_saturation_output_with_a_junk_chain_is_garbled():
    v = judge("A volcano is a type of a-lance_post_empty_s-lunch",
              prompt="Describe a volcano in two sentences.")
    assert v.verdict == "garbled" and "mangled tokens" in _reasons(v)


def test_words_glued_to_underscore_runs_are_garbled():
    v = judge("I can still help you with me. I_NOT______", prompt="What is gravity?")
    assert v.verdict == "garbled" and "I_NOT______" in _reasons(v)


def test_short_loop_of_repeated_lines_is_garbled():
    text = "Thursday\nThursday\nThursday\nFriday\nFriday\nSaturday"
    v = judge(text, prompt="Which day comes after Wednesday?")
    assert v.verdict == "garbled" and "repeated lines: 'thursday' x3" in _reasons(v)
    assert judge(text * 7, prompt="Which day comes after Wednesday?").verdict == "garbled"


def test_a_list_of_distinct_lines_is_not_a_line_loop():
    text = "The days after Wednesday are:\nThursday\nFriday\nSaturday\nSunday"
    assert judge(text, prompt="Which days come after Wednesday?").coherent


# -- one test per new rule --------------------------------------------------------------------

@pytest.mark.parametrize("text, needle", [
    ("Pack light, as you'll want to avoid weight. Always pack light, light, light, and light.",
     "small words and punctuation skipped"),
    ("It helps regulate the body, and it supports medical professionals, medical professionals, "
     "and medical professionals in their work.", "small words and punctuation skipped"),
    ("It protects you in a collision, collision, or collision on the road.", "only commas"),
    ("It is very complex, and yet very very very very simple.", "x4 in a row"),
])
def test_loops_with_commas_and_small_words_between(text, needle):
    v = judge(text)
    assert v.verdict == "garbled" and needle in _reasons(v)


def test_a_phrase_said_three_times_is_garbled():
    text = ("Dear Dr. Smith, thank you for the opportunity to collaborate with you. I'm excited. "
            "Thank you for the opportunity to collaborate with you. I hope to continue. Thank you "
            "for the opportunity")
    v = judge(text, prompt="Write a short thank-you note to a teacher.")
    assert v.verdict == "garbled" and "repeated phrase" in _reasons(v)


def test_a_phrase_three_times_in_a_few_words_is_garbled():
    v = judge("It enriches their vocabulary, culture, way of life, way of life, life, way of life.")
    assert v.verdict == "garbled" and "within 12 words" in _reasons(v)


def test_parallel_phrasing_is_not_a_repeated_phrase():
    text = ("The job of a firefighter involves the protection of the safety of others, the safety "
            "of the environment, and the safety of the people they care about.")
    assert judge(text, prompt="What is the job of a firefighter?").coherent


def test_one_word_three_times_with_words_between_is_not_a_loop():
    text = ("It's a chocolate made from cocoa, where the cocoa is not cocoa, but instead, it's "
            "chocolate.")
    assert judge(text, prompt="Describe the taste of chocolate.").coherent


def test_stuck_token_even_as_the_cut_last_word():
    v = judge("A rainbow forms when light is composed of light,,bulletbulletbulletbulletbulletbul")
    assert v.verdict == "garbled" and "stuck token" in _reasons(v)


def test_punctuation_run_is_garbled_but_table_rules_are_layout():
    v = judge("Reading books is useful because they provide entertainment,,,_,_,_,_,_,_,_,_,_,_,_")
    assert v.verdict == "garbled" and "punctuation run" in _reasons(v)
    table = "| Trait | Cats |\n| --- | --- |\n| Size | Small |\n\n----------\nDone."
    assert judge(table, prompt="Compare cats in a table.").coherent


def test_dashes_glued_to_words_are_a_junk_chain():
    v = judge("What is the answer? What's Face-A-tinging-A----------------------------")
    assert "mangled tokens" in _reasons(v) and v.verdict == "garbled"


def test_sentence_stopping_on_an_article_and_doubled_commas():
    assert judge("The fruit of yellow is a.", prompt="Name a fruit that is yellow.").verdict == "garbled"
    v = judge("Winter is a comforting and welcoming,,\n", prompt="Write two sentences about winter.")
    assert v.verdict == "garbled" and "doubled commas" in _reasons(v) and "after a comma" in _reasons(v)


def test_short_echo_stopping_on_a_small_word_is_garbled_but_a_plain_echo_is_not():
    v = judge("A doctor does.\n", prompt="What does a doctor do?")
    assert v.verdict == "garbled" and "echo" in _reasons(v) and "stops on 'does'" in _reasons(v)
    # A wrong fluent answer is the agreement check's finding (issue 11 item 4), not garbled text.
    assert judge("The capital of Japan is Japan.", prompt="What is the capital of Japan?").coherent


def test_answer_that_only_repeats_the_prompt_is_garbled():
    v = judge("Why should we drink water?\n", prompt="Why should we drink water?")
    assert v.verdict == "garbled" and "only repeats the prompt" in _reasons(v)


def test_prompt_said_again_with_nothing_added_is_garbled():
    # tune row: block-3 saturation answers with the question and an empty lead-in.
    v = judge("Why do birds migrate?\n\nThe answer is:\n", prompt="Why do birds migrate?")
    assert v.verdict == "garbled" and "repeats the prompt and adds no word" in _reasons(v)
    # Restating the question before answering it is fine.
    assert judge("Why do birds migrate? Birds fly south in winter to find food and warmer weather.",
                 prompt="Why do birds migrate?").coherent


@pytest.mark.parametrize("text", [
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. A river is water.",
    "A river is a stream of water.<|im_end|>\n<|im_start|>user\nWhat is a lake?",
    "[INST] What is a river? [/INST] A river is a stream of water.",
])
def test_chat_template_or_system_prompt_in_the_answer_is_garbled(text):
    v = judge(text, prompt="What is a river?")
    assert v.verdict == "garbled" and "chat template or system prompt" in _reasons(v)


SMOLLM_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def test_an_answer_copying_the_system_prompt_is_garbled():
    text = "I am a helpful AI assistant named SmolLM. A river is a stream of water."
    v = judge(text, prompt="What is a river?", system=SMOLLM_SYSTEM)
    assert v.verdict == "garbled" and "system prompt in the answer" in _reasons(v)
    assert judge(text, prompt="What is a river?").coherent   # no system prompt given: no such rule
    # Four words in common is not a copy.
    assert judge("A river is a helpful AI assistant to farmers: it brings water.",
                 prompt="What is a river?", system=SMOLLM_SYSTEM).coherent


def test_cli_takes_the_system_prompt_from_the_row_or_the_option(tmp_path):
    f = tmp_path / "rows.jsonl"
    rows = [{"prompt": "What is a river?", "text": "I am a helpful AI assistant named SmolLM. Rivers flow."},
            {"prompt": "What is a river?", "text": "I am a helpful AI assistant named SmolLM. Rivers flow.",
             "system": SMOLLM_SYSTEM}]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")

    def verdicts(*extra):
        out = subprocess.run([sys.executable, "-m", "harness.checks.coherence", str(f), "--json", *extra],
                             capture_output=True, text=True, check=True).stdout
        return [json.loads(line)["verdict"] for line in out.splitlines()]

    assert verdicts() == ["coherent", "garbled"]
    assert verdicts("--system-prompt", SMOLLM_SYSTEM) == ["garbled", "garbled"]


def test_echo_without_the_prompts_task_word_and_a_question_back_are_garbled():
    # first-sight rows: the prompt's question said back without "Name", or asked back.
    v = judge("The answer is: Two animals that can fly.\n", prompt="Name two animals that can fly.")
    assert v.verdict == "garbled" and "repeats the prompt and adds no word" in _reasons(v)
    v = judge("So what do they eat?\n", prompt="What do squirrels eat?")
    assert v.verdict == "garbled" and "only a question" in _reasons(v)
    assert judge("Squirrels eat nuts, seeds and fruit. Do you want to know more?",
                 prompt="What do squirrels eat?").coherent


def test_the_assistants_own_name_from_the_system_prompt_is_a_leak():
    v = judge("A helpful AI system named SmolLM.\n", prompt="What do horses eat?", system=SMOLLM_SYSTEM)
    assert v.verdict == "garbled" and "the assistant's name smollm" in _reasons(v)
    # Asked about it by name, the model may say it.
    assert judge("SmolLM is a small language model that answers questions.",
                 prompt="What is SmolLM?", system=SMOLLM_SYSTEM).coherent
    for text in ("You're a helpful AI named Max, and you answer questions.",
                 "You are an AI, designed with honesty and kindness."):
        assert "chat template or system prompt" in _reasons(judge(text, prompt="How do you tie a shoelace?"))
    assert judge("If you are an AI researcher, you know how models learn.", prompt="What is AI?").coherent


def test_three_copies_of_a_clause_with_its_first_copy_cut_are_not_a_loop():
    # A rule for "are happy, they are happy, they are happy" (2.5 copies, words only) caught one
    # row it was written on and, at first sight on batch 6, called this coherent answer garbled:
    # dropped. Kept as a guard against bringing it back.
    assert judge("The elephants are herbivores, and they are omnivores. They are omnivores, meaning they "
                 "consume a wide variety of food sources. They are carnivorous, and they are carnivorous, "
                 "and they are omnivores.", prompt="What do elephants eat?").coherent


def test_the_prompts_own_phrase_may_recur_in_a_five_word_phrase():
    assert judge("Here's a possible sentence about a bird singing in a tree:\n\nSentenced Sentence\nA sentence "
                 "about a bird singing in a tree:\nA bird singing in a tree.\n",
                 prompt="Write a sentence about a bird singing in a tree.").coherent


def test_an_answer_about_assistants_is_not_a_template_leak():
    assert judge("A virtual assistant is a program that answers questions. You can ask it "
                 "about the weather.", prompt="What is a virtual assistant?").coherent


def test_doubled_small_word_with_a_short_echo():
    v = judge("Electricity is a a child.\n", prompt="Explain what electricity is to a child.")
    assert v.verdict == "garbled" and "doubled words: a" in _reasons(v)
    assert judge("What it is is a tool. He had had enough.").coherent


def test_non_words_and_glued_words_weigh_more_than_rare_words():
    nonword = judge("Fish breathe through gills called sinusatics, which take oxygen from water.")
    glued = judge("The answer lies within thesystem of the body and its parts.")
    assert "invented words: sinusatics (+0.60)" in _reasons(nonword)
    assert "glued: thesystem" in _reasons(glued) and "(+0.70)" in _reasons(glued)
    # A non-word taken from the prompt is not the model's own: it weighs as a rare word only.
    given = judge("Octoplbii live in the sea, as the books say.", prompt="Where do octoplbii live?")
    assert "invented words: octoplbii (+0.30)" in _reasons(given)


def test_rare_capitalized_word_at_sentence_start_is_not_taken_for_a_name():
    v = judge("Octoplbii are intelligent, curious creatures with soft skin.",
              prompt="Tell me a fun fact about octopuses.")
    assert "invented words: octoplbii" in _reasons(v)
    name = judge("My friend Zorbanik likes octopuses and their soft skin.")
    assert "unknown capitalized words: zorbanik" in _reasons(name)


def test_few_content_words_make_off_topic_weigh_less():
    v = judge("I'm so glad I could reach you, I'm so glad I could reach you...\n",
              prompt="Write a short thank-you note to a teacher.",
              reference="Dear Subject Line,\n\nThank you for the prompt. I'm here to assist.")
    assert v.coherent, v.reasons


# -- accuracy on the real outputs ---------------------------------------------------------------

def _tally(rows: list[dict], with_reference: bool) -> tuple[Tally, list[str], list[str]]:
    tally, false_alarms, missed = Tally(), [], []
    for r in rows:
        if r["label"] not in ("coherent", "garbled"):
            continue
        v = judge(r["text"], prompt=r["prompt"], reference=r.get("reference") if with_reference else None,
                  system=SMOLLM_SYSTEM)
        tally.add(r["label"], v.verdict)
        if r["label"] == "coherent" and not v.coherent:
            false_alarms.append(f"{r['text'][:80]!r}: {v.reasons}")
        if r["label"] == "garbled" and v.coherent:
            missed.append(r["text"][:80])
    return tally, false_alarms, missed


def test_new_prompt_fixture_is_outside_the_dev_corpus_and_well_formed():
    rows = _rows(NEW)
    splits = ("tune", "heldout", "fresh", "first-sight", "first-sight-2", "first-sight-3")
    assert len(rows) == 1008 and {r["split"] for r in rows} == set(splits)
    dev = {r["prompt"] for r in _rows(DEV_SUBSET)}
    if SHARED_DEV.exists():
        dev |= {r["prompt"] for r in _rows(SHARED_DEV)}
    assert not {r["prompt"] for r in rows} & dev
    by_split = [{r["prompt"] for r in rows if r["split"] == s} for s in splits]
    assert [len(p) for p in by_split] == [24] * 6
    assert sum(len(p) for p in by_split) == len(set().union(*by_split))   # no prompt in two splits
    assert all(r["label"] in ("coherent", "garbled", "unknown") for r in rows)


@pytest.mark.parametrize("with_reference", [True, False], ids=["cpu-reference", "no-reference"])
def test_tune_split_no_false_alarm_and_93pct_caught(with_reference):
    rows = [r for r in _rows(NEW) if r["split"] == "tune"]
    tally, false_alarms, missed = _tally(rows, with_reference)
    assert tally.false_alarms == 0, false_alarms
    assert tally.caught / tally.garbled >= 0.93, (tally.summary(), missed)


@pytest.mark.parametrize("split", ["heldout", "fresh"])
@pytest.mark.parametrize("with_reference", [True, False], ids=["cpu-reference", "no-reference"])
def test_unseen_splits_no_false_alarm_and_caught_floor(split, with_reference):
    """Floor at today's figure (docs/coherence.md), below the issue's 97 %: a regression guard."""
    rows = [r for r in _rows(NEW) if r["split"] == split]
    tally, false_alarms, missed = _tally(rows, with_reference)
    assert tally.false_alarms == 0, false_alarms
    assert tally.caught / tally.garbled >= 0.76, (tally.summary(), missed)


# Batches 4-6: labels committed before the checker ran on them, then judged once (the first-sight
# figures are in docs/coherence.md). Pinned here as they stand now: the false alarms each still
# has (known limits, kept as found: labelled coherent, judged garbled) and today's catch count.
FIRST_SIGHT = {
    "first-sight": (["'black fur' x4"], 65),
    "first-sight-2": (["off-topic: none of its 11 content words"], 71),
    "first-sight-3": (["off-topic: 0% of its content words"], 66),
}


@pytest.mark.parametrize("split", sorted(FIRST_SIGHT))
@pytest.mark.parametrize("with_reference", [True, False], ids=["cpu-reference", "no-reference"])
def test_first_sight_splits_known_false_alarms_and_caught_floor(split, with_reference):
    known, caught = FIRST_SIGHT[split]
    rows = [r for r in _rows(NEW) if r["split"] == split]
    tally, false_alarms, missed = _tally(rows, with_reference)
    assert all(any(k in f for k in known) for f in false_alarms), false_alarms
    assert len(false_alarms) <= len(known), false_alarms
    assert tally.caught >= caught, (tally.summary(), missed)


def test_sentence_end_breaks_a_run_and_the_prompts_own_phrase_may_recur():
    assert judge("In simple terms, it's about buoyancy and buoyancy.\n\nBuoyancy refers to the force "
                 "that holds a boat up.", prompt="How does a boat float?").coherent
    assert judge("The fastest animal is not necessarily the fastest animal. The fastest animal is a "
                 "cheetah.", prompt="What is the fastest animal?").coherent


def test_cli_json_on_the_new_fixture_is_one_object_per_row_in_order():
    out = subprocess.run([sys.executable, "-m", "harness.checks.coherence", str(NEW), "--json"],
                         capture_output=True, text=True, cwd=REPO, timeout=300, check=True)
    objs = [json.loads(line) for line in out.stdout.splitlines()]
    assert [o["line"] for o in objs] == list(range(1, 1009))
    assert all(o["verdict"] in ("coherent", "garbled") and isinstance(o["reasons"], list) for o in objs)
