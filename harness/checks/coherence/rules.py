"""The rules: measurements -> verdict (decisive and suspicious rules, see the package doc)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.checks import textstats as ts
from harness.checks.coherence.measure import measure
from harness.checks.coherence.verdict import Thresholds, Verdict
from harness.checks.surprise import Surprise


def quote(text: str, limit: int = 160) -> str:
    flat = text.replace("\n", "\\n")
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")


def _expect_found(text: str, expect_any: Sequence[str]) -> bool:
    low = " ".join(text.lower().split())
    tokens = {u.text for u in ts.units(text) if u.kind in ("word", "num")}
    for want in expect_any:
        w = " ".join(want.lower().split())
        if not w:
            continue
        if any(ts.is_cjk(c) for c in w) or " " in w or not w.replace("'", "").isalnum():
            if w in low:  # phrases, Chinese, "3.14": plain substring
                return True
        elif tokens & {w, w + "s", w + "es", w + "'s"}:
            return True  # cat -> cats, kitten -> kitten's; but not cat -> catch
        elif len(w) >= 5 and any(t.startswith(w) and len(t) - len(w) <= 3 for t in tokens):
            return True  # scramble -> scrambled
    return False


def judge(text: str, prompt: str | None = None, reference: str | None = None,
          expect_any: Sequence[str] = (), thresholds: Thresholds | None = None,
          surprise: Surprise | None = None, system: str | None = None) -> Verdict:
    """Verdict on one generated text; `reasons` names every rule that fired.

    `surprise`: the reference model's per-token scores of `text` (surprise.Scorer), optional.
    `system`: the export's system prompt (its chat template's default), optional: an answer
    that copies a run of it is reading back its context.
    """
    if not isinstance(text, str):
        raise TypeError(f"judge() needs the generated text as str, got {type(text).__name__}")
    th = thresholds or Thresholds()
    verdict = decide(measure(text, prompt, reference, th, surprise, system), th)
    if expect_any and not _expect_found(text, expect_any):
        verdict.reasons.append(f"expectation: none of {list(expect_any)} appear")
        verdict.verdict = "garbled"
    return verdict


def decide(m: dict[str, Any], th: Thresholds) -> Verdict:
    """Apply the rules to measurements from `measure` (split out so calibration re-runs only this)."""
    decisive: list[str] = []
    suspicious: list[tuple[float, str]] = []
    scores: dict[str, float] = {
        "oov_rate": m["oov_rate"], "function_rate": m["function_rate"],
        "rare_cjk_rate": m["rare_cjk_rate"], "relevance": m["relevance"],
        "compression": m["compression"], "repeat_n": float(m["repeat_n"]),
        "loop_span": float(m["loop"].span if m["loop"] else 0),
    }

    if not m["has_content"]:
        decisive.append("empty: no letters, digits or CJK characters")
    if m["controls"]:
        shown = ", ".join(f"U+{ord(c):04X}" for c in sorted(set(m["controls"]))[:5])
        decisive.append(f"control characters: {len(m['controls'])} ({shown})")
    if m["parrot"]:
        decisive.append("echo: the answer only repeats the prompt")
    elif m["echo_prompt"]:
        decisive.append("echo: the answer repeats the prompt and adds no word of its own")
    if len(m["system_leak"].split()) >= th.system_leak_words:
        decisive.append(f"system prompt in the answer: {quote(m['system_leak'], 60)}")
    elif m["system_names"]:
        decisive.append(f"system prompt in the answer: the assistant's name {', '.join(m['system_names'])}")
    if m["template_leaks"]:
        decisive.append("chat template or system prompt in the answer: "
                        + ", ".join(quote(t, 40) for t in m["template_leaks"][:3]))
    if m["fffd"]:
        decisive.append(f"U+FFFD replacement characters: {m['fffd']} (broken byte decoding)")

    # Token soup: many non-dictionary words, or content words with no grammar between them.
    if m["n_distinct"] >= th.soup_min_words and m["oov_rate"] >= th.soup_oov_rate:
        examples = ", ".join(sorted(set(m["invented"]))[:5])
        decisive.append(f"token soup: {m['oov_rate']:.0%} of {m['n_distinct']} distinct words are not "
                        f"English words (e.g. {examples})")
    elif (m["n_prose_words"] >= th.soup_function_min_words and m["oov_rate"] >= th.soup_mixed_oov_rate
          and m["function_rate"] < th.soup_mixed_function_rate):
        decisive.append(f"token soup: {m['oov_rate']:.0%} non-words and only "
                        f"{m['function_rate']:.0%} function words in {m['n_words']} words")
    if m["n_prose_words"] >= th.soup_function_min_words and m["function_rate"] < th.soup_function_rate:
        decisive.append(f"token soup: only {m['function_rate']:.0%} function words "
                        f"(the, of, is...) in {m['n_words']} words")
    if m["n_cjk"] >= th.soup_min_words and m["rare_cjk_rate"] >= th.soup_rare_cjk_rate:
        decisive.append(f"token soup: {m['rare_cjk_rate']:.0%} of {m['n_cjk']} Chinese characters "
                        f"are rare ({''.join(m['rare_cjk'][:8])})")

    loop = m["loop"]
    if loop and loop.repeats >= th.loop_min_repeats:
        if loop.span >= th.loop_min_span:
            decisive.append(f"repetition loop: {quote(loop.pattern, 60)} x{loop.repeats:.0f}")
        elif loop.span >= th.loop_min_span // 2 and loop.period >= 2:
            suspicious.append((th.short_loop_weight,
                               f"short repetition: {quote(loop.pattern, 60)} x{loop.repeats:.0f}"))
    run, run_word = m["word_run"]
    if run >= th.word_run and not any(r.startswith("repetition loop") for r in decisive):
        decisive.append(f"repetition loop: {quote(run_word, 30)} x{run} in a row")
    cl = m["content_loop"]
    # One word needs one more turn: "cocoa, where the cocoa is not cocoa" is clumsy, not a loop.
    looped = any(r.startswith("repetition loop") for r in decisive)
    if (cl and cl.repeats >= th.content_loop_repeats + (cl.period == 1) and not looped):
        decisive.append(f"repetition loop (small words and punctuation skipped): "
                        f"{quote(cl.pattern, 60)} x{cl.repeats:.0f}")
    tr = m["tight_run"]
    if tr[0] >= th.tight_run and not any(r.startswith("repetition loop") for r in decisive):
        decisive.append(f"repetition loop: {quote(tr[1], 30)} x{tr[0]} (only commas, 'and', 'or' between)")
    if m["dense_count"] >= th.phrase_min_count:
        decisive.append(f"repeated phrase: {quote(m['dense_phrase'], 40)} x{m['dense_count']} "
                        f"within {th.dense_window} words")
    if m["punct_run"]:
        decisive.append(f"punctuation run: {quote(m['punct_run'], 30)}")
    if m["phrase_count"] >= th.phrase_min_count:
        decisive.append(f"repeated phrase: {quote(m['phrase'], 60)} x{m['phrase_count']}")
    if m["stuck"]:
        decisive.append(f"stuck token: {', '.join(quote(w, 30) for w in m['stuck'][:3])}")
    lr = m["lines"]
    if lr.run >= th.line_loop_run:
        decisive.append(f"repeated lines: {quote(lr.run_line, 60)} x{lr.run} back to back")
    elif lr.run == 2:
        suspicious.append((th.line_pair_weight, f"a line said twice back to back: {quote(lr.run_line, 60)}"))
    if lr.lines >= 4 and lr.duplicates / lr.lines >= th.dup_lines_share:
        suspicious.append((th.dup_lines_weight,
                           f"repeated lines: {lr.duplicates} of {lr.lines} lines repeat an earlier one"))
    if m["repeat_n"] >= th.repeat_ngram_len:
        suspicious.append((th.repeat_weight,
                           f"repeated passage of {m['repeat_n']} words: {quote(m['repeat_text'], 80)}"))

    # Relevance: what share of the text's content words come from the prompt or reference.
    if m["has_reference"]:
        if (m["relevance"] == 0.0 and m["n_content"] >= th.offtopic_min_content
                and m["n_reference"] >= th.offtopic_min_content):
            decisive.append(f"off-topic: none of its {m['n_content']} content words appear in the "
                            "prompt or the reference answer")
        else:
            w = th.offtopic_weight * max(0.0, 1.0 - m["relevance"] / th.offtopic_clear_at)
            w *= min(1.0, m["n_content"] / th.offtopic_full_at)   # three words say little
            if m["topic_hits"]:
                w *= th.offtopic_topic_factor
            if w > 0.0 and m["n_content"]:
                suspicious.append((w, f"off-topic: {m['relevance']:.0%} of its content words appear "
                                      "in the prompt or the reference answer"))
    elif m["has_topic"] and m["topic_hits"] == 0 and m["n_content"]:
        suspicious.append((th.offtopic_prompt_only_weight,
                           "off-topic: names none of the prompt's subject words"))

    if m["invented_plain"]:
        glued, nonwords = set(m["glued"]), set(m["nonwords"]) - set(m["glued"])
        w = (th.invented_weight * (len(m["invented_plain"]) - len(glued) - len(nonwords))
             + th.nonword_weight * len(nonwords) + th.glued_weight * len(glued))
        suspicious.append((w, f"invented words: {', '.join(m['invented_plain'][:6])}"
                              + (f" (glued: {', '.join(sorted(glued)[:3])})" if glued else "")))
    if m["invented_names"]:
        suspicious.append((th.invented_name_weight * len(m["invented_names"]),
                           f"unknown capitalized words: {', '.join(m['invented_names'][:6])}"))
    if m["mangled"]:
        w = sum(th.junk_chain_weight if junk else
                th.long_chain_weight if parts >= th.long_chain_parts else th.mangled_weight
                for _, parts, junk in m["mangled"])
        suspicious.append((w, "mangled tokens: "
                              + ", ".join(quote(t, 40) for t, _, _ in m["mangled"][:4])))
    if m["doubled"]:
        w = sum(th.doubled_small_weight if d in ts.FUNCTION_WORDS else th.doubled_word_weight
                for d in m["doubled"])
        suspicious.append((w, f"doubled words: {', '.join(m['doubled'][:4])}"))
    if m["broken_ends"]:
        suspicious.append((th.broken_end_weight * m["broken_ends"],
                           f"sentences stopping on an article: {m['broken_ends']}"))
    if m["has_prompt"] and m["n_words"] <= th.echo_max_words and m["new_content"] == 0 and m["n_cjk"] == 0:
        suspicious.append((th.echo_weight, "echo: the answer adds no word to the prompt's"))
        if m["weak_end"]:
            suspicious.append((th.weak_end_weight, f"the answer stops on {m['weak_end']!r}"))
        if m["asks_back"]:
            suspicious.append((th.asks_back_weight, "the answer is only a question"))
    if m["double_commas"]:
        suspicious.append((th.double_comma_weight, f"doubled commas: {m['double_commas']}"))
    if m["comma_close"]:
        suspicious.append((th.comma_close_weight, "the answer was closed right after a comma"))
    if m["surprising"]:
        w = min(th.surprise_cap, th.surprise_weight * len(m["surprising"]))
        shown = ", ".join(f"{tok!r} ({gap:.1f})" for _, tok, gap in m["surprising"][:4])
        suspicious.append((w, f"surprising to the reference model: {len(m['surprising'])} tokens "
                              f"over {th.surprise_gap:.0f} nats below its best choice: {shown}"))
    if m["fragments"]:
        suspicious.append((th.fragment_weight * len(m["fragments"]),
                           f"fragment lines: {len(m['fragments'])} "
                           f"({', '.join(quote(f, 12) for f in m['fragments'][:5])})"))
    if m["dangling"]:
        suspicious.append((th.dangling_weight * m["dangling"],
                           f"lines ending on an article or preposition: {m['dangling']}"))

    weight = float(sum(w for w, _ in suspicious))
    scores["suspicion"] = weight
    reasons = decisive + [f"{why} (+{w:.2f})" for w, why in suspicious]
    garbled = bool(decisive) or weight >= th.garbled_at
    return Verdict("garbled" if garbled else "coherent", reasons, scores)


def assert_coherent(text: str, prompt: str | None = None, reference: str | None = None,
                    expect_any: Sequence[str] = (), thresholds: Thresholds | None = None) -> Verdict:
    """pytest-facing check: AssertionError naming the rules that fired and quoting the text."""
    v = judge(text, prompt=prompt, reference=reference, expect_any=expect_any, thresholds=thresholds)
    if not v.coherent:
        lines = ["generated text judged garbled:"]
        lines += [f"  - {r}" for r in v.reasons]
        if prompt:
            lines.append(f"  prompt:    {quote(prompt, 200)}")
        lines.append(f"  text:      {quote(text, 400)}")
        if reference:
            lines.append(f"  reference: {quote(reference, 400)}")
        raise AssertionError("\n".join(lines))
    return v
