"""Is a generated text coherent or garbled? (English and Chinese)

`judge(text, prompt=, reference=, expect_any=)` measures the text (textstats), then
applies rules. Two kinds of rules:

- decisive: one is enough (empty text, control characters, U+FFFD, token soup,
  a repetition loop, an answer sharing nothing with both the prompt and the reference);
- suspicious: each adds a weight; garbled when the weights reach 1.0 (off-topic,
  invented words, mangled tokens, fragment lines, a long repeated passage...).
  The activation-saturation fault writes fluent text that drifts off-topic and
  mangles a word here and there: no single sign is sure, together they are.

A text cut mid-sentence is not garbled by itself (runs stop at max tokens), so the
end of the text is never held against it. Thresholds live in `Thresholds`,
calibrated on ../shared/corpus/coherence-dev.jsonl with cross-validation by prompt
(benchmarks/coherence_eval.py).

CLI: `python -m harness.checks.coherence FILE.jsonl [--json]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Sequence

from harness.checks import textstats as ts
from harness.checks.surprise import ReferenceUnavailable, Scorer, Surprise
from harness.errors import HarnessError

VerdictLabel = Literal["coherent", "garbled"]


@dataclass(frozen=True)
class Thresholds:
    """Rule limits. Defaults are the calibrated values; tests and the CV script override them."""

    # decisive
    soup_oov_rate: float = 0.20        # share of non-dictionary words (en)
    soup_min_words: int = 6
    soup_rare_cjk_rate: float = 0.25   # share of rare CJK characters (zh)
    soup_function_rate: float = 0.08   # share of function words in >= soup_function_min_words
    soup_function_min_words: int = 15
    soup_mixed_oov_rate: float = 0.10      # fewer non-words, but together with...
    soup_mixed_function_rate: float = 0.12  # ...almost no grammar words
    loop_min_span: int = 12            # units covered by a back-to-back repetition
    line_loop_run: int = 3             # the same line this many times back to back
    word_run: int = 4                  # one word this many times in a row ("very very very very")
    content_loop_repeats: float = 3.0  # a content-word pattern back to back, small words and commas skipped
    phrase_n: int = 5                  # a phrase of this many words...
    tight_run: int = 3                 # a word this many times with only commas/and/or between
    dense_n: int = 3                   # a phrase of this many words (one a content word)...
    dense_window: int = 12             # ...three times within this many words
    phrase_min_count: int = 3          # ...said this many times anywhere in the text
    loop_min_repeats: float = 3.0
    offtopic_min_content: int = 8      # content words (text and reference) before "shares nothing" is decisive
    # suspicious (weights add up; >= garbled_at is garbled)
    offtopic_weight: float = 0.7       # at relevance 0; falls linearly to 0 at offtopic_clear_at
    offtopic_clear_at: float = 0.25    # share of content words shared with prompt topic+reference
    offtopic_topic_factor: float = 0.5 # the text names the prompt's subject: weight halved
    offtopic_prompt_only_weight: float = 0.3  # no reference: the subject is never named
    offtopic_full_at: int = 8          # content words before off-topic weighs in full (fewer: less)
    invented_zipf: float = 1.5         # words rarer than this are "not in the dictionary"
    invented_min_len: int = 4
    invented_weight: float = 0.3       # per distinct invented word in lower case (refate)
    nonword_weight: float = 0.6        # ...that no word list knows at all (gossipytic)
    glued_weight: float = 0.7          # ...made of two common words glued (thesystem)
    invented_name_weight: float = 0.15 # per distinct Capitalized one: often a rare name
    mangled_weight: float = 0.35       # per mangled token (snake_joined, a-b-c-d-e chains, a=b)
    long_chain_parts: int = 8          # a joined chain this long is junk on its own...
    long_chain_weight: float = 0.7     # ...and weighs this much
    fragment_weight: float = 0.2       # per fragment line (a lone word or symbol on its own line)
    dangling_weight: float = 0.2       # per line that stops on an article or preposition
    repeat_ngram_len: int = 6          # words in a passage repeated verbatim
    repeat_weight: float = 0.5
    short_loop_weight: float = 0.4     # a loop below the decisive size
    line_pair_weight: float = 0.4      # a line said twice back to back
    dup_lines_share: float = 0.25      # lines repeating an earlier line (of >= 4 lines)...
    dup_lines_weight: float = 0.5      # ...weigh this much
    junk_chain_weight: float = 1.0     # a-b_c chains mixing - and _, or words glued to ___ runs
    doubled_word_weight: float = 0.35  # a content word twice in a row ("ready ready", "cultures, cultures")
    doubled_small_weight: float = 0.5  # a small word twice in a row ("is a a child")
    broken_end_weight: float = 0.7     # a sentence that stops on an article ("The fruit of yellow is a.")
    echo_max_words: int = 12           # a short answer...
    echo_weight: float = 0.5           # ...that adds no content word to the prompt's
    weak_end_weight: float = 0.5       # a short answer closed on 'of', 'does', 'to' ("A doctor does.")
    double_comma_weight: float = 0.6   # ",," or ", ," in prose: no writer's slip
    comma_close_weight: float = 0.5    # the model closed its answer (EOS) right after a comma
    # reference model (optional input, harness/checks/surprise.py): tokens far below its best choice
    surprise_gap: float = 6.0          # nats below the reference's best token (healthy sampling: <= 3.0)
    surprise_weight: float = 0.35      # per such token...
    surprise_cap: float = 0.7          # ...never more than this: alone it never decides
    garbled_at: float = 1.0


@dataclass
class Verdict:
    verdict: VerdictLabel
    reasons: list[str] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)

    @property
    def coherent(self) -> bool:
        return self.verdict == "coherent"

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reasons": list(self.reasons),
                "scores": {k: round(v, 4) for k, v in self.scores.items()}}


# -- measurements ------------------------------------------------------------------

_ARTICLE_END = frozenset(
    "a an the of to with for from by in on at and or than is are was were my your our their its".split()
)
_CODE_RE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.S)
_MANGLED_RES = (
    re.compile(r"[^\W\d_]_[^\W\d_]"),                 # words_joined_by_underscores
    re.compile(r"(?:[^\W\d_]+-){4,}[^\W\d_]+"),       # a-b-c-d-e hyphen chains (5+ parts)
    re.compile(r"[^\W\d_]=[^\W\d_]|[^\W\d_]#\d"),     # Is=It, F#113
    re.compile(r"[^\W\d_]\"[^\W\d_]"),                # L"post: a quote glued inside a word
    re.compile(r"[a-z]{2}[.:][A-Z][a-z]"),              # write.In, again:The: sentences glued
)
# Junk joins no writer uses in prose: '-' and '_' in one chain (a-lance_post_empty_s-lunch),
# or a run of underscores glued to a word (I_NOT______); blanks to fill in ("____") stand alone.
_JUNK_CHAIN_RES = (
    re.compile(r"[^\W\d_]-[^\W\d_]+_[^\W\d_]|[^\W\d_]_[^\W\d_]+-[^\W\d_]"),
    re.compile(r"[^\W\d_]__+|__+[^\W\d_]"),
    re.compile(r"[^\W\d_]-{4,}|-{4,}[^\W\d_]"),   # Face-A------------
)
_NUM_CHAIN_RE = re.compile(r"\d+(?:-\d+){5,}")
_CHAIN_SPLIT_RE = re.compile(r"[-_@=#]+")


def _scrambled_numbers(tok: str) -> bool:
    """1-2-1-3-5-4: a long number chain that is not a count (1-2-3-4-5-6 is fine)."""
    for m in _NUM_CHAIN_RE.finditer(tok):
        nums = [int(x) for x in m.group().split("-")]
        steps = {b - a for a, b in zip(nums, nums[1:])}
        if len(steps) > 1:
            return True
    return False


def _mangled_tokens(text: str) -> list[tuple[str, int, bool]]:
    """Tokens glued from several words by _ - = \" or run-on sentences: (token, parts, junk)."""
    # Code spans legitimately hold snake_case and a=b: leave them out.
    prose = _CODE_RE.sub(" ", ts.strip_social(text))
    out = []
    for tok in prose.split():
        if any(r.search(tok) for r in _MANGLED_RES + _JUNK_CHAIN_RES) or _scrambled_numbers(tok):
            parts = [p for p in _CHAIN_SPLIT_RE.split(tok) if p.strip("*\"'.,:;!?()[]")]
            junk = any(r.search(tok) for r in _JUNK_CHAIN_RES)
            out.append((tok, len(parts), junk))
    return out


_LIST_LINE_RE = re.compile(r"\s*(?:\d+[.)]|[-*•+]|\|)\s*\S")


def _is_fragment(line: str) -> bool:
    """A line holding a lone short word or symbol ('The', 'E', '@', '*J'), not a heading."""
    s = line.strip()
    # Headings, code fences, table rules and separators are layout, not fragments.
    if not s or s.endswith(":") or re.fullmatch(r"[\s`|:\-=*_#~+]+", s):
        return False
    if re.fullmatch(r"(?:\d+[.)]|[-*•])\s*\S.*", s) and len(ts.words(s)) >= 2:
        return False  # a list item
    ws = ts.words(s)
    letters = sum(1 for c in s if c.isalpha())
    if ts.cjk_chars(s):
        return len(ts.cjk_chars(s)) <= 1 and not any(c.isdigit() for c in s)
    if not ws:
        return not any(c.isdigit() for c in s)
    return len(ws) == 1 and (letters <= 2 or ws[0] in ts.FUNCTION_WORDS)


def _dangling_lines(lines: list[str]) -> int:
    """Lines (not the last: max tokens may cut it) that stop on an article or preposition."""
    count = 0
    for line in lines[:-1]:
        ws = ts.words(line)
        if len(ws) >= 1 and re.search(r"[^\W\d_]\s*$", line) and ws[-1] in _ARTICLE_END:
            count += 1
    return count


def _norm(text: str) -> str:
    return " ".join(u.text for u in ts.units(text) if u.kind != "other")


_PUNCT_RUN_RE = re.compile(r"[,_;](?:\s*[,_;]){11,}")
_BROKEN_END_RE = re.compile(r"(?:^|\s)(?:a|an|the)\s*[.!](?=\s|$)", re.I)


def _broken_ends(text: str) -> int:
    """Sentences closed right after an article: 'The fruit of yellow is a.'"""
    return len(_BROKEN_END_RE.findall(_CODE_RE.sub(" ", text)))


_WEAK_END_RE = re.compile(r"\b(of|to|for|with|from|by|in|on|at|does|do|did|is|are|was|were|and|or|but)\s*[.!]\s*$",
                         re.I)


def _weak_end(text: str) -> str:
    """The small word a closed answer stops on ('does' in 'A doctor does.'), or ''."""
    m = _WEAK_END_RE.search(text)
    return m.group(1).lower() if m else ""


def _surprising(surprise: Surprise | None, gap: float) -> list[tuple[int, str, float]]:
    """Tokens far below the reference's best choice; the last one may be a word cut by the
    token cap and re-tokenized otherwise, so it is left out."""
    if surprise is None or not surprise.tokens:
        return []
    last = len(surprise.tokens) - 1
    return [hit for hit in surprise.surprising(gap) if hit[0] != last]


def measure(text: str, prompt: str | None = None, reference: str | None = None,
            th: Thresholds | None = None, surprise: Surprise | None = None) -> dict[str, Any]:
    """All raw measurements of one text (numbers plus a few examples for messages)."""
    th = th or Thresholds()
    body = text
    # A U+FFFD at the very end is a multi-byte character cut by the token cap, not a fault.
    fffd = body.rstrip().rstrip("\ufffd").count("\ufffd")
    controls = [c for c in body if ts.is_control(c)]
    unit_list = ts.units(ts.strip_social(body))
    seq = [u.text for u in unit_list]
    lex = [u.text for u in unit_list if u.kind in ("word", "num", "cjk")]
    words = ts.words(body)
    cjk = ts.cjk_chars(body)
    # The last word may be cut by the token cap ("...producing ener"): not held against the text.
    judged = words[:-1] if words and re.search(r"[^\W\d_]$", body) else words
    invented = [w for w in judged if len(w) >= th.invented_min_len and ts.zipf_en(ts.unpossessive(w)) < th.invented_zipf]
    # Case of the first letter as written: Capitalized rare words are often names.
    # A name is capitalized every time it is written ("Parenil ... parenil" is not a name),
    # and at least once inside a sentence: a sentence's first word is capitalized anyway.
    written: dict[str, list[tuple[str, bool]]] = {}
    for mw in re.finditer(r"[^\W\d_]+(?:['’][^\W\d_]+)*", ts.strip_social(body)):
        starts = re.search(r"(?:^|[.!?:]\s+|\n\W*)$", body[:mw.start()]) is not None
        written.setdefault(mw.group().lower().replace("’", "'"), []).append((mw.group(), starts))
    invented_names = sorted({w for w in invented if written.get(w)
                             and all(f[:1].isupper() and not re.search(r"[a-z][A-Z]", f)
                                     for f, _ in written[w])
                             and not all(start for _, start in written[w])})
    invented_plain = sorted(set(invented) - set(invented_names))
    # Distinct words: one rare name repeated four times is not soup.
    distinct = set(judged)
    oov_all = [w for w in distinct if ts.zipf_en(w) < th.invented_zipf]
    rare_cjk = [c for c in cjk if ts.zipf_zh(c) < 3.0]
    loop = ts.longest_loop(seq)
    # The same loop with commas, 'and', 'or' and other small words taken out:
    # "light, light, light, and light"; "medical professionals, ..., and medical professionals".
    content_seq = [u for u in lex if u not in ts.FUNCTION_WORDS]
    content_loop = ts.longest_loop(content_seq, most_repeats=True)
    phrase_count, phrase = ts.most_frequent_ngram(lex, th.phrase_n)
    # The prompt's own phrase may come back often ("The fastest animal is not the fastest animal").
    dense_count, dense_phrase = ts.dense_ngram(lex, th.dense_n, th.dense_window,
                                               known=set(ts.words(prompt or "")))
    # Commas, 'and', 'or' do not break a run; a sentence end does ("buoyancy and buoyancy. Buoyancy").
    tight = [u for u in seq if u not in (",", "and", "or")]
    # Runs of junk punctuation (',_,_,_'); tables and rules (| --- |, ====, ...) are layout.
    punct_run = max((mm.group() for mm in _PUNCT_RUN_RE.finditer(body)), key=len, default="")
    line_rep = ts.line_repeats(body)
    rep_n, rep_text = ts.longest_repeated_ngram(lex)
    lines = [ln for ln in body.split("\n") if ln.strip()]
    prose_words = [w for ln in lines if not _LIST_LINE_RE.match(ln) for w in ts.words(ln)]
    text_stems = ts.content_stems(body)
    # Relevance compares words: a Chinese answer to an English prompt shares none by nature.
    share = ts.cjk_share(body)
    if prompt and abs(ts.cjk_share(prompt) - share) > 0.5:
        prompt = None
    if reference and abs(ts.cjk_share(reference) - share) > 0.5:
        reference = None
    prompt_stems = ts.content_stems(prompt, task=True) if prompt else set()
    # Echoed task words ("describe", "sentence") do not make an answer on-topic.
    instr = {s for s in (ts.content_stem(w) for w in ts.INSTRUCTION_WORDS) if s}
    topic = prompt_stems - instr
    ref_stems = (ts.content_stems(reference) if reference else set()) - instr
    on_topic = text_stems & (topic | ref_stems)
    given = set(ts.words(prompt or "")) | set(ts.words(reference or ""))
    return {
        "text": body,
        "chars": len(body.strip()),
        "has_content": any(c.isalnum() for c in body),
        "controls": controls,
        "fffd": fffd,
        "n_words": len(words),
        "n_cjk": len(cjk),
        "cjk_share": ts.cjk_share(body),
        "oov_rate": len(oov_all) / len(distinct) if distinct else 0.0,
        "n_distinct": len(distinct),
        "invented": invented,
        "invented_plain": invented_plain,
        # Not in the word list at all (zipf 0) and not taken from the prompt or reference:
        # 'gossipytic', 'thermoklub'; glued pairs of common words: 'thesystem'.
        "nonwords": sorted(w for w in invented_plain if ts.zipf_en(ts.unpossessive(w)) == 0.0
                           and w not in given),
        "glued": sorted(w for w in invented_plain if ts.glued_pair(w) and w not in given),
        "invented_names": invented_names,
        # Over prose only: list items and table rows ("2. Banana", "| Red |") need no grammar.
        "function_rate": (sum(1 for w in prose_words if w in ts.FUNCTION_WORDS) / len(prose_words))
        if prose_words else 1.0,
        "n_prose_words": len(prose_words),
        "rare_cjk_rate": len(rare_cjk) / len(cjk) if cjk else 0.0,
        "rare_cjk": rare_cjk,
        "loop": loop,
        "lines": line_rep,
        "content_loop": content_loop,
        "word_run": ts.longest_run([u.text for u in unit_list if u.kind == "word"], seq),
        "phrase_count": phrase_count,
        "dense_count": dense_count,
        "dense_phrase": dense_phrase,
        "tight_run": ts.longest_run(lex, tight),
        "punct_run": punct_run,
        "phrase": phrase,
        "stuck": sorted({w for w in words if ts.stuck_token(w)}),  # the cut last word too
        "doubled": ts.doubled_words(body),
        "broken_ends": _broken_ends(body),
        "new_content": len(text_stems - prompt_stems - instr),
        "weak_end": _weak_end(body),
        "surprising": _surprising(surprise, th.surprise_gap),
        "parrot": bool(prompt) and _norm(body) == _norm(prompt or "") and bool(_norm(body)),
        "double_commas": len(re.findall(r"[,;]\s*[,;]", _CODE_RE.sub(" ", body))),
        # llm_demo prints end_with ("\n") only when the model stopped on its own (EOS).
        "comma_close": bool(re.search(r"[,;]\s*\n\s*$", body)),
        "repeat_n": rep_n,
        "repeat_text": rep_text,
        "compression": ts.compression_ratio(body),
        "top_share": ts.top_share(lex),
        "fragments": [ln.strip() for ln in lines if _is_fragment(ln)],
        "dangling": _dangling_lines(lines),
        "mangled": _mangled_tokens(body),
        "n_content": len(text_stems),
        "relevance": (len(on_topic) / len(text_stems)) if text_stems else 1.0,
        "topic_hits": len(text_stems & topic),
        "has_topic": bool(topic),
        "has_reference": bool(reference and reference.strip()),
        "n_reference": len(ref_stems),
        "has_prompt": bool(prompt_stems),
        "on_topic": sorted(on_topic),
    }


# -- rules -------------------------------------------------------------------------------

def _quote(text: str, limit: int = 160) -> str:
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
          surprise: Surprise | None = None) -> Verdict:
    """Verdict on one generated text; `reasons` names every rule that fired.

    `surprise`: the reference model's per-token scores of `text` (surprise.Scorer), optional.
    """
    if not isinstance(text, str):
        raise TypeError(f"judge() needs the generated text as str, got {type(text).__name__}")
    th = thresholds or Thresholds()
    verdict = decide(measure(text, prompt, reference, th, surprise), th)
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
            decisive.append(f"repetition loop: {_quote(loop.pattern, 60)} x{loop.repeats:.0f}")
        elif loop.span >= th.loop_min_span // 2 and loop.period >= 2:
            suspicious.append((th.short_loop_weight,
                               f"short repetition: {_quote(loop.pattern, 60)} x{loop.repeats:.0f}"))
    run, run_word = m["word_run"]
    if run >= th.word_run and not any(r.startswith("repetition loop") for r in decisive):
        decisive.append(f"repetition loop: {_quote(run_word, 30)} x{run} in a row")
    cl = m["content_loop"]
    # One word needs one more turn: "cocoa, where the cocoa is not cocoa" is clumsy, not a loop.
    looped = any(r.startswith("repetition loop") for r in decisive)
    if (cl and cl.repeats >= th.content_loop_repeats + (cl.period == 1) and not looped):
        decisive.append(f"repetition loop (small words and punctuation skipped): "
                        f"{_quote(cl.pattern, 60)} x{cl.repeats:.0f}")
    tr = m["tight_run"]
    if tr[0] >= th.tight_run and not any(r.startswith("repetition loop") for r in decisive):
        decisive.append(f"repetition loop: {_quote(tr[1], 30)} x{tr[0]} (only commas, 'and', 'or' between)")
    if m["dense_count"] >= th.phrase_min_count:
        decisive.append(f"repeated phrase: {_quote(m['dense_phrase'], 40)} x{m['dense_count']} "
                        f"within {th.dense_window} words")
    if m["punct_run"]:
        decisive.append(f"punctuation run: {_quote(m['punct_run'], 30)}")
    if m["phrase_count"] >= th.phrase_min_count:
        decisive.append(f"repeated phrase: {_quote(m['phrase'], 60)} x{m['phrase_count']}")
    if m["stuck"]:
        decisive.append(f"stuck token: {', '.join(_quote(w, 30) for w in m['stuck'][:3])}")
    lr = m["lines"]
    if lr.run >= th.line_loop_run:
        decisive.append(f"repeated lines: {_quote(lr.run_line, 60)} x{lr.run} back to back")
    elif lr.run == 2:
        suspicious.append((th.line_pair_weight, f"a line said twice back to back: {_quote(lr.run_line, 60)}"))
    if lr.lines >= 4 and lr.duplicates / lr.lines >= th.dup_lines_share:
        suspicious.append((th.dup_lines_weight,
                           f"repeated lines: {lr.duplicates} of {lr.lines} lines repeat an earlier one"))
    if m["repeat_n"] >= th.repeat_ngram_len:
        suspicious.append((th.repeat_weight,
                           f"repeated passage of {m['repeat_n']} words: {_quote(m['repeat_text'], 80)}"))

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
                              + ", ".join(_quote(t, 40) for t, _, _ in m["mangled"][:4])))
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
                           f"({', '.join(_quote(f, 12) for f in m['fragments'][:5])})"))
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
            lines.append(f"  prompt:    {_quote(prompt, 200)}")
        lines.append(f"  text:      {_quote(text, 400)}")
        if reference:
            lines.append(f"  reference: {_quote(reference, 400)}")
        raise AssertionError("\n".join(lines))
    return v


# -- CLI -----------------------------------------------------------------------------------

class RowsError(Exception):
    """The JSONL file cannot be judged; the message says where and why."""


@dataclass(frozen=True)
class Row:
    line: int
    prompt: str | None
    text: str
    reference: str | None
    label: str | None
    expect_any: tuple[str, ...]
    surprise: Surprise | None = None


def load_rows(path: Path) -> list[Row]:
    """Read a JSONL file of {prompt, text, reference?, label?, expect_any?} rows."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RowsError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RowsError(f"{path}: cannot read as UTF-8 text ({exc})") from None
    rows: list[Row] = []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RowsError(f"{path}:{n}: not valid JSON ({exc.msg}); each line must be one "
                            "JSON object") from None
        if not isinstance(obj, dict):
            raise RowsError(f"{path}:{n}: expected a JSON object with 'text', got "
                            f"{type(obj).__name__}")
        if not isinstance(obj.get("text"), str):
            raise RowsError(f"{path}:{n}: key 'text' (the generated text, a string) is missing "
                            "or not a string")
        for key in ("prompt", "reference", "label"):
            if obj.get(key) is not None and not isinstance(obj[key], str):
                raise RowsError(f"{path}:{n}: key '{key}' must be a string")
        label = obj.get("label")
        if label is not None and label not in ("coherent", "garbled", "unknown"):
            raise RowsError(f"{path}:{n}: label {label!r} is not one of coherent, garbled, unknown")
        expect = obj.get("expect_any", [])
        if isinstance(expect, str):
            expect = [expect]
        if not isinstance(expect, list) or not all(isinstance(e, str) for e in expect):
            raise RowsError(f"{path}:{n}: 'expect_any' must be a list of strings")
        surprise = None
        if obj.get("surprise") is not None:
            try:
                surprise = Surprise.from_json(obj["surprise"])
            except HarnessError as exc:
                raise RowsError(f"{path}:{n}: key 'surprise': {exc}") from None
        rows.append(Row(n, obj.get("prompt"), obj["text"], obj.get("reference"), label, tuple(expect),
                        surprise))
    if not rows:
        raise RowsError(f"{path}: no rows (expected one JSON object per line)")
    return rows


@dataclass
class Tally:
    coherent: int = 0
    garbled: int = 0
    false_alarms: int = 0   # coherent called garbled
    caught: int = 0         # garbled called garbled

    def add(self, label: str | None, verdict: str) -> None:
        if label == "coherent":
            self.coherent += 1
            self.false_alarms += verdict == "garbled"
        elif label == "garbled":
            self.garbled += 1
            self.caught += verdict == "garbled"

    @property
    def scored(self) -> int:
        return self.coherent + self.garbled

    def summary(self) -> str:
        if not self.scored:
            return "no labelled rows (coherent/garbled): no accuracy to report"
        right = (self.coherent - self.false_alarms) + self.caught
        fa = self.false_alarms / self.coherent if self.coherent else 0.0
        caught = self.caught / self.garbled if self.garbled else 1.0
        return (f"labelled rows: {self.scored}  accuracy: {right / self.scored:.1%}  "
                f"false alarms: {self.false_alarms}/{self.coherent} ({fa:.1%})  "
                f"garbled caught: {self.caught}/{self.garbled} ({caught:.1%})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.checks.coherence",
        description="Judge generated texts (JSONL rows with prompt, text, optional reference and "
                    "label) as coherent or garbled.")
    parser.add_argument("file", type=Path, help="JSONL file, one object per line")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object per row (verdict, reasons, scores) and nothing else")
    parser.add_argument("--reference-model", type=Path, metavar="CONFIG",
                        help="score each row's tokens with this export on the host (PyPI mnn) and "
                             "use that as one more signal; rows may also carry 'surprise'")
    args = parser.parse_args(argv)
    try:
        rows = load_rows(args.file)
        scorer = Scorer(args.reference_model) if args.reference_model else None
    except (RowsError, ReferenceUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tally = Tally()
    for row in rows:
        surprise = row.surprise
        if surprise is None and scorer is not None and row.prompt is not None:
            surprise = scorer.score(row.prompt, row.text)
        v = judge(row.text, prompt=row.prompt, reference=row.reference, expect_any=row.expect_any,
                  surprise=surprise)
        tally.add(row.label, v.verdict)
        if args.json:
            out = {"line": row.line, **v.to_json()}
            if row.label is not None:
                out["label"] = row.label
            print(json.dumps(out, ensure_ascii=False))
        else:
            mark = ""
            if row.label in ("coherent", "garbled"):
                mark = "  ok" if row.label == v.verdict else f"  WRONG (label {row.label})"
            print(f"line {row.line}: {v.verdict}{mark}  {_quote(row.text, 70)}")
            for reason in v.reasons:
                print(f"    - {reason}")
    if not args.json:
        print(tally.summary())
    return 0


def _cli() -> int:
    try:
        return main()
    except BrokenPipeError:
        # `... --json | head`: the reader left; not an error worth a traceback.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps interpreter exit quiet
        return 0


if __name__ == "__main__":
    sys.exit(_cli())
