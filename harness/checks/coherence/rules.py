"""The rules: measurements -> verdict (decisive and suspicious rules, see the package doc)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.checks import textstats as ts
from harness.checks.coherence.measure import Measurements, measure
from harness.checks.coherence.verdict import CoherenceKind, TextVerdict, Thresholds
from harness.checks.surprise import Surprise
from harness.findings import Finding, Severity


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
          surprise: Surprise | None = None, system: str | None = None) -> TextVerdict:
    """The verdict on one generated text; its findings name every rule that fired.

    `surprise`: the reference model's per-token scores of `text` (surprise.Scorer), optional.
    `system`: the export's system prompt (its chat template's default), optional: an answer
    that copies a run of it is reading back its context.
    """
    if not isinstance(text, str):
        raise TypeError(f"judge() needs the generated text as str, got {type(text).__name__}")
    th = thresholds or Thresholds()
    verdict = decide(measure(text, prompt, reference, th, surprise, system), th)
    if expect_any and not _expect_found(text, expect_any):
        verdict.findings.append(Finding(CoherenceKind.EXPECTATION, f"expectation: none of {list(expect_any)} appear"))
        verdict.verdict = "garbled"
    return verdict


@dataclass
class _Fired:
    """The rules that fired: decisive ones (one is enough) and suspicious ones with a weight."""

    decisive: list[Finding] = field(default_factory=list)
    suspicious: list[tuple[float, CoherenceKind, str]] = field(default_factory=list)

    def decide(self, kind: CoherenceKind, why: str) -> None:
        self.decisive.append(Finding(kind, why))

    def suspect(self, kind: CoherenceKind, weight: float, why: str) -> None:
        self.suspicious.append((weight, kind, why))

    def has(self, kind: CoherenceKind) -> bool:
        return any(f.kind is kind for f in self.decisive)

    @property
    def weight(self) -> float:
        return float(sum(w for w, _, _ in self.suspicious))

    def findings(self) -> list[Finding]:
        return self.decisive + [Finding(kind, f"{why} (+{w:.2f})", Severity.WARNING, found=w)
                                for w, kind, why in self.suspicious]


def decide(m: Measurements, th: Thresholds) -> TextVerdict:
    """Apply the rules to measurements from `measure` (split out so calibration re-runs only this)."""
    fired = _Fired()
    for rules in (_surface_rules, _soup_rules, _repetition_rules, _line_rules, _relevance_rules, _word_rules,
                  _answer_rules):
        rules(m, fired, th)
    scores: dict[str, float] = {
        "oov_rate": m.lexicon.oov_rate, "function_rate": m.lexicon.function_rate,
        "rare_cjk_rate": m.lexicon.rare_cjk_rate, "relevance": m.answer.relevance,
        "compression": m.repetition.compression, "repeat_n": float(m.repetition.repeat_n),
        "loop_span": float(m.repetition.loop.span if m.repetition.loop else 0), "suspicion": fired.weight,
    }
    garbled = bool(fired.decisive) or fired.weight >= th.garbled_at
    return TextVerdict("garbled" if garbled else "coherent", fired.findings(), scores)


def _surface_rules(m: Measurements, fired: _Fired, th: Thresholds) -> None:
    """Empty, control or replacement characters, the prompt or the context read back."""
    s, an = m.surface, m.answer
    if not s.has_content:
        fired.decide(CoherenceKind.EMPTY, "empty: no letters, digits or CJK characters")
    if s.controls:
        shown = ", ".join(f"U+{ord(c):04X}" for c in sorted(set(s.controls))[:5])
        fired.decide(CoherenceKind.CONTROL_CHARACTERS, f"control characters: {len(s.controls)} ({shown})")
    if an.parrot:
        fired.decide(CoherenceKind.ECHO, "echo: the answer only repeats the prompt")
    elif an.echo_prompt:
        fired.decide(CoherenceKind.ECHO, "echo: the answer repeats the prompt and adds no word of its own")
    if len(s.system_leak.split()) >= th.system_leak_words:
        fired.decide(CoherenceKind.SYSTEM_PROMPT, f"system prompt in the answer: {quote(s.system_leak, 60)}")
    elif s.system_names:
        fired.decide(CoherenceKind.SYSTEM_PROMPT,
                     f"system prompt in the answer: the assistant's name {', '.join(s.system_names)}")
    if s.template_leaks:
        fired.decide(CoherenceKind.TEMPLATE_LEAK, "chat template or system prompt in the answer: "
                     + ", ".join(quote(t, 40) for t in s.template_leaks[:3]))
    if s.fffd:
        fired.decide(CoherenceKind.REPLACEMENT_CHARACTERS,
                     f"U+FFFD replacement characters: {s.fffd} (broken byte decoding)")


def _soup_rules(m: Measurements, fired: _Fired, th: Thresholds) -> None:
    """Token soup: many non-dictionary words, or content words with no grammar between them."""
    lx, n_words = m.lexicon, m.surface.n_words
    if lx.n_distinct >= th.soup_min_words and lx.oov_rate >= th.soup_oov_rate:
        examples = ", ".join(sorted(set(lx.invented))[:5])
        fired.decide(CoherenceKind.TOKEN_SOUP, f"token soup: {lx.oov_rate:.0%} of {lx.n_distinct} distinct words "
                     f"are not English words (e.g. {examples})")
    elif (lx.n_prose_words >= th.soup_function_min_words and lx.oov_rate >= th.soup_mixed_oov_rate
          and lx.function_rate < th.soup_mixed_function_rate):
        fired.decide(CoherenceKind.TOKEN_SOUP, f"token soup: {lx.oov_rate:.0%} non-words and only "
                     f"{lx.function_rate:.0%} function words in {n_words} words")
    if lx.n_prose_words >= th.soup_function_min_words and lx.function_rate < th.soup_function_rate:
        fired.decide(CoherenceKind.TOKEN_SOUP, f"token soup: only {lx.function_rate:.0%} function words "
                     f"(the, of, is...) in {n_words} words")
    if m.surface.n_cjk >= th.soup_min_words and lx.rare_cjk_rate >= th.soup_rare_cjk_rate:
        fired.decide(CoherenceKind.TOKEN_SOUP, f"token soup: {lx.rare_cjk_rate:.0%} of {m.surface.n_cjk} Chinese "
                     f"characters are rare ({''.join(lx.rare_cjk[:8])})")


def _repetition_rules(m: Measurements, fired: _Fired, th: Thresholds) -> None:
    """Loops and runs of words, repeated phrases, junk punctuation, stuck tokens."""
    rp = m.repetition
    loop = rp.loop
    if loop and loop.repeats >= th.loop_min_repeats:
        if loop.span >= th.loop_min_span:
            fired.decide(CoherenceKind.REPETITION_LOOP, f"repetition loop: {quote(loop.pattern, 60)} x{loop.repeats:.0f}")
        elif loop.span >= th.loop_min_span // 2 and loop.period >= 2:
            fired.suspect(CoherenceKind.SHORT_REPETITION, th.short_loop_weight,
                          f"short repetition: {quote(loop.pattern, 60)} x{loop.repeats:.0f}")
    run, run_word = rp.word_run
    if run >= th.word_run and not fired.has(CoherenceKind.REPETITION_LOOP):
        fired.decide(CoherenceKind.REPETITION_LOOP, f"repetition loop: {quote(run_word, 30)} x{run} in a row")
    cl = rp.content_loop
    # One word needs one more turn: "cocoa, where the cocoa is not cocoa" is clumsy, not a loop.
    if (cl and cl.repeats >= th.content_loop_repeats + (cl.period == 1)
            and not fired.has(CoherenceKind.REPETITION_LOOP)):
        fired.decide(CoherenceKind.REPETITION_LOOP, f"repetition loop (small words and punctuation skipped): "
                     f"{quote(cl.pattern, 60)} x{cl.repeats:.0f}")
    tr = rp.tight_run
    if tr[0] >= th.tight_run and not fired.has(CoherenceKind.REPETITION_LOOP):
        fired.decide(CoherenceKind.REPETITION_LOOP,
                     f"repetition loop: {quote(tr[1], 30)} x{tr[0]} (only commas, 'and', 'or' between)")
    if rp.dense_count >= th.phrase_min_count:
        fired.decide(CoherenceKind.REPEATED_PHRASE, f"repeated phrase: {quote(rp.dense_phrase, 40)} "
                     f"x{rp.dense_count} within {th.dense_window} words")
    if m.surface.punct_run:
        fired.decide(CoherenceKind.PUNCTUATION_RUN, f"punctuation run: {quote(m.surface.punct_run, 30)}")
    if rp.phrase_count >= th.phrase_min_count:
        fired.decide(CoherenceKind.REPEATED_PHRASE, f"repeated phrase: {quote(rp.phrase, 60)} x{rp.phrase_count}")
    if m.surface.stuck:
        fired.decide(CoherenceKind.STUCK_TOKEN, f"stuck token: {', '.join(quote(w, 30) for w in m.surface.stuck[:3])}")


def _line_rules(m: Measurements, fired: _Fired, th: Thresholds) -> None:
    """Lines said again (back to back, or a share of them), a passage repeated verbatim."""
    lr, rp = m.repetition.lines, m.repetition
    if lr.run >= th.line_loop_run:
        fired.decide(CoherenceKind.REPEATED_LINES, f"repeated lines: {quote(lr.run_line, 60)} x{lr.run} back to back")
    elif lr.run == 2:
        fired.suspect(CoherenceKind.REPEATED_LINES, th.line_pair_weight,
                      f"a line said twice back to back: {quote(lr.run_line, 60)}")
    if lr.lines >= 4 and lr.duplicates / lr.lines >= th.dup_lines_share:
        fired.suspect(CoherenceKind.REPEATED_LINES, th.dup_lines_weight,
                      f"repeated lines: {lr.duplicates} of {lr.lines} lines repeat an earlier one")
    if rp.repeat_n >= th.repeat_ngram_len:
        fired.suspect(CoherenceKind.REPEATED_PASSAGE, th.repeat_weight,
                      f"repeated passage of {rp.repeat_n} words: {quote(rp.repeat_text, 80)}")


def _relevance_rules(m: Measurements, fired: _Fired, th: Thresholds) -> None:
    """What share of the text's content words come from the prompt or the reference."""
    an = m.answer
    if an.has_reference:
        if (an.relevance == 0.0 and an.n_content >= th.offtopic_min_content
                and an.n_reference >= th.offtopic_min_content):
            fired.decide(CoherenceKind.OFF_TOPIC, f"off-topic: none of its {an.n_content} content words appear in "
                         "the prompt or the reference answer")
            return
        w = th.offtopic_weight * max(0.0, 1.0 - an.relevance / th.offtopic_clear_at)
        w *= min(1.0, an.n_content / th.offtopic_full_at)   # three words say little
        if an.topic_hits:
            w *= th.offtopic_topic_factor
        if w > 0.0 and an.n_content:
            fired.suspect(CoherenceKind.OFF_TOPIC, w, f"off-topic: {an.relevance:.0%} of its content words appear "
                          "in the prompt or the reference answer")
    elif an.has_topic and an.topic_hits == 0 and an.n_content:
        fired.suspect(CoherenceKind.OFF_TOPIC, th.offtopic_prompt_only_weight,
                      "off-topic: names none of the prompt's subject words")


def _word_rules(m: Measurements, fired: _Fired, th: Thresholds) -> None:
    """Invented words and names, mangled tokens, doubled words, sentences ending on an article."""
    lx = m.lexicon
    if lx.invented_plain:
        glued, nonwords = set(lx.glued), set(lx.nonwords) - set(lx.glued)
        w = (th.invented_weight * (len(lx.invented_plain) - len(glued) - len(nonwords))
             + th.nonword_weight * len(nonwords) + th.glued_weight * len(glued))
        fired.suspect(CoherenceKind.INVENTED_WORDS, w, f"invented words: {', '.join(lx.invented_plain[:6])}"
                      + (f" (glued: {', '.join(sorted(glued)[:3])})" if glued else ""))
    if lx.invented_names:
        fired.suspect(CoherenceKind.INVENTED_WORDS, th.invented_name_weight * len(lx.invented_names),
                      f"unknown capitalized words: {', '.join(lx.invented_names[:6])}")
    if lx.mangled:
        w = sum(th.junk_chain_weight if junk else
                th.long_chain_weight if parts >= th.long_chain_parts else th.mangled_weight
                for _, parts, junk in lx.mangled)
        fired.suspect(CoherenceKind.MANGLED_TOKENS, w, "mangled tokens: "
                      + ", ".join(quote(t, 40) for t, _, _ in lx.mangled[:4]))
    if lx.doubled:
        w = sum(th.doubled_small_weight if d in ts.FUNCTION_WORDS else th.doubled_word_weight for d in lx.doubled)
        fired.suspect(CoherenceKind.DOUBLED_WORDS, w, f"doubled words: {', '.join(lx.doubled[:4])}")
    if m.answer.broken_ends:
        fired.suspect(CoherenceKind.BROKEN_END, th.broken_end_weight * m.answer.broken_ends,
                      f"sentences stopping on an article: {m.answer.broken_ends}")


def _answer_rules(m: Measurements, fired: _Fired, th: Thresholds) -> None:
    """The answer's shape: a short echo, how it ends, stray commas, surprising tokens,
    fragment and dangling lines."""
    s, an = m.surface, m.answer
    if an.has_prompt and s.n_words <= th.echo_max_words and an.new_content == 0 and s.n_cjk == 0:
        fired.suspect(CoherenceKind.ECHO, th.echo_weight, "echo: the answer adds no word to the prompt's")
        if an.weak_end:
            fired.suspect(CoherenceKind.WEAK_END, th.weak_end_weight, f"the answer stops on {an.weak_end!r}")
        if an.asks_back:
            fired.suspect(CoherenceKind.ASKS_BACK, th.asks_back_weight, "the answer is only a question")
    if s.double_commas:
        fired.suspect(CoherenceKind.DOUBLED_COMMAS, th.double_comma_weight, f"doubled commas: {s.double_commas}")
    if s.comma_close:
        fired.suspect(CoherenceKind.COMMA_CLOSE, th.comma_close_weight, "the answer was closed right after a comma")
    if an.surprising:
        w = min(th.surprise_cap, th.surprise_weight * len(an.surprising))
        shown = ", ".join(f"{tok!r} ({gap:.1f})" for _, tok, gap in an.surprising[:4])
        fired.suspect(CoherenceKind.SURPRISING, w, f"surprising to the reference model: {len(an.surprising)} tokens "
                      f"over {th.surprise_gap:.0f} nats below its best choice: {shown}")
    if an.fragments:
        fired.suspect(CoherenceKind.FRAGMENTS, th.fragment_weight * len(an.fragments),
                      f"fragment lines: {len(an.fragments)} ({', '.join(quote(f, 12) for f in an.fragments[:5])})")
    if an.dangling:
        fired.suspect(CoherenceKind.DANGLING, th.dangling_weight * an.dangling,
                      f"lines ending on an article or preposition: {an.dangling}")


def assert_coherent(text: str, prompt: str | None = None, reference: str | None = None,
                    expect_any: Sequence[str] = (), thresholds: Thresholds | None = None) -> TextVerdict:
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
