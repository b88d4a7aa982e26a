"""Raw measurements of one generated text: numbers plus a few examples for messages.
No verdicts here: rules.py turns them into one."""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.checks import textstats as ts
from harness.checks.coherence.verdict import Thresholds
from harness.checks.surprise import Surprise

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


def _question(prompt: str) -> str:
    """The prompt without its leading task words: 'Name two animals that can fly' -> 'two animals
    that can fly' (an echo often drops them)."""
    ws = _norm(prompt).split()
    k = 0
    while k < len(ws) and ws[k] in ts.INSTRUCTION_WORDS:
        k += 1
    return " ".join(ws[k:]) if len(ws) - k >= 3 else " ".join(ws)


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


def surprising_tokens(surprise: Surprise | None, gap: float) -> list[tuple[int, str, float]]:
    """Tokens far below the reference's best choice; the last one may be a word cut by the
    token cap and re-tokenized otherwise, so it is left out."""
    if surprise is None or not surprise.tokens:
        return []
    last = len(surprise.tokens) - 1
    return [hit for hit in surprise.surprising(gap) if hit[0] != last]


@dataclass(frozen=True)
class Surface:
    """What the characters themselves show: content at all, control and replacement
    characters, leaked template or system text, stuck tokens, junk punctuation."""

    text: str
    chars: int
    has_content: bool
    controls: list[str]
    fffd: int
    n_words: int
    n_cjk: int
    cjk_share: float
    template_leaks: list[str]
    system_leak: str
    system_names: list[str]
    stuck: list[str]
    punct_run: str
    double_commas: int
    comma_close: bool


@dataclass(frozen=True)
class Lexicon:
    """The words: how many no dictionary knows (invented, glued, names), grammar words,
    rare Chinese characters, mangled and doubled tokens."""

    oov_rate: float
    n_distinct: int
    invented: list[str]
    invented_plain: list[str]
    nonwords: list[str]
    glued: list[str]
    invented_names: list[str]
    function_rate: float
    n_prose_words: int
    rare_cjk_rate: float
    rare_cjk: list[str]
    mangled: list[tuple[str, int, bool]]
    doubled: list[str]


@dataclass(frozen=True)
class Repetition:
    """Loops, runs, repeated phrases, lines and passages."""

    loop: ts.Loop | None
    lines: ts.LineRepeats
    content_loop: ts.Loop | None
    word_run: tuple[int, str]
    phrase_count: int
    phrase: str
    dense_count: int
    dense_phrase: str
    tight_run: tuple[int, str]
    repeat_n: int
    repeat_text: str
    compression: float
    top_share: float


@dataclass(frozen=True)
class Answer:
    """The text as an answer to its prompt: relevance to the prompt and the reference, echoes,
    how it ends, fragment lines, tokens the reference model finds surprising."""

    new_content: int
    weak_end: str
    asks_back: bool
    surprising: list[tuple[int, str, float]]
    parrot: bool
    echo_prompt: bool
    broken_ends: int
    fragments: list[str]
    dangling: int
    n_content: int
    relevance: float
    topic_hits: int
    has_topic: bool
    has_reference: bool
    n_reference: int
    has_prompt: bool
    on_topic: list[str]


@dataclass(frozen=True)
class Measurements:
    """All raw measurements of one text, by what they look at; `rules.decide` judges them."""

    surface: Surface
    lexicon: Lexicon
    repetition: Repetition
    answer: Answer


@dataclass(frozen=True)
class _Split:
    """The text cut into the pieces every measurement reads."""

    body: str
    units: list[ts.Unit]
    seq: list[str]  # every unit's text
    lex: list[str]  # words, numbers and CJK characters
    words: list[str]
    cjk: list[str]
    judged: list[str]  # the words, the last one left out when the token cap may have cut it
    lines: list[str]  # non-blank lines


def _split(text: str) -> _Split:
    units = ts.units(ts.strip_social(text))
    words = ts.words(text)
    # The last word may be cut by the token cap ("...producing ener"): not held against the text.
    judged = words[:-1] if words and re.search(r"[^\W\d_]$", text) else words
    return _Split(text, units, [u.text for u in units], [u.text for u in units if u.kind in ("word", "num", "cjk")],
                  words, ts.cjk_chars(text), judged, [ln for ln in text.split("\n") if ln.strip()])


def _surface(t: _Split, prompt: str | None, system: str | None, th: Thresholds) -> Surface:
    body, words = t.body, t.words
    return Surface(
        text=body, chars=len(body.strip()), has_content=any(c.isalnum() for c in body),
        controls=[c for c in body if ts.is_control(c)],
        # A U+FFFD at the very end is a multi-byte character cut by the token cap, not a fault.
        fffd=body.rstrip().rstrip("\ufffd").count("\ufffd"),
        n_words=len(words), n_cjk=len(t.cjk), cjk_share=ts.cjk_share(body), template_leaks=ts.template_leaks(body),
        system_leak=ts.shared_run(body, system) if system else "",
        # A word of the system prompt no word list knows is the assistant's own name ('SmolLM'):
        # in an answer to a prompt that does not name it, the model is reading its context.
        system_names=sorted({w for w in words if system and w in ts.words(system)
                             and ts.zipf_en(w) < th.invented_zipf and w not in ts.words(prompt or "")}),
        stuck=sorted({w for w in words if ts.stuck_token(w)}),  # the cut last word too
        # Runs of junk punctuation (',_,_,_'); tables and rules (| --- |, ====, ...) are layout.
        punct_run=max((mm.group() for mm in _PUNCT_RUN_RE.finditer(body)), key=len, default=""),
        double_commas=len(re.findall(r"[,;]\s*[,;]", _CODE_RE.sub(" ", body))),
        # llm_demo prints end_with ("\n") only when the model stopped on its own (EOS).
        comma_close=bool(re.search(r"[,;]\s*\n\s*$", body)))


def _names(t: _Split, invented: list[str]) -> list[str]:
    """Invented words that are names: capitalized every time they are written ("Parenil ...
    parenil" is not a name), and at least once inside a sentence, where capitals are not a
    sentence's first word."""
    written: dict[str, list[tuple[str, bool]]] = {}
    for mw in re.finditer(r"[^\W\d_]+(?:['’][^\W\d_]+)*", ts.strip_social(t.body)):
        starts = re.search(r"(?:^|[.!?:]\s+|\n\W*)$", t.body[:mw.start()]) is not None
        written.setdefault(mw.group().lower().replace("’", "'"), []).append((mw.group(), starts))
    return sorted({w for w in invented if written.get(w)
                   and all(f[:1].isupper() and not re.search(r"[a-z][A-Z]", f) for f, _ in written[w])
                   and not all(start for _, start in written[w])})


def _lexicon(t: _Split, prompt: str | None, reference: str | None, th: Thresholds) -> Lexicon:
    invented = [w for w in t.judged
                if len(w) >= th.invented_min_len and ts.zipf_en(ts.unpossessive(w)) < th.invented_zipf]
    names = _names(t, invented)
    plain = sorted(set(invented) - set(names))
    distinct = set(t.judged)  # one rare name repeated four times is not soup
    oov_all = [w for w in distinct if ts.zipf_en(w) < th.invented_zipf]
    rare_cjk = [c for c in t.cjk if ts.zipf_zh(c) < 3.0]
    given = set(ts.words(prompt or "")) | set(ts.words(reference or ""))
    # Over prose only: list items and table rows ("2. Banana", "| Red |") need no grammar.
    prose = [w for ln in t.lines if not _LIST_LINE_RE.match(ln) for w in ts.words(ln)]
    return Lexicon(
        oov_rate=len(oov_all) / len(distinct) if distinct else 0.0, n_distinct=len(distinct), invented=invented,
        invented_plain=plain,
        # Not in the word list at all (zipf 0) and not taken from the prompt or reference:
        # 'gossipytic', 'thermoklub'; glued pairs of common words: 'thesystem'.
        nonwords=sorted(w for w in plain if ts.zipf_en(ts.unpossessive(w)) == 0.0 and w not in given),
        glued=sorted(w for w in plain if ts.glued_pair(w) and w not in given),
        invented_names=names,
        function_rate=(sum(1 for w in prose if w in ts.FUNCTION_WORDS) / len(prose)) if prose else 1.0,
        n_prose_words=len(prose), rare_cjk_rate=len(rare_cjk) / len(t.cjk) if t.cjk else 0.0, rare_cjk=rare_cjk,
        mangled=_mangled_tokens(t.body), doubled=ts.doubled_words(t.body))


def _repetition(t: _Split, prompt: str | None, th: Thresholds) -> Repetition:
    known = set(ts.words(prompt or ""))
    # The same loop with commas, 'and', 'or' and other small words taken out:
    # "light, light, light, and light"; "medical professionals, ..., and medical professionals".
    content_seq = [u for u in t.lex if u not in ts.FUNCTION_WORDS]
    phrase_count, phrase = ts.most_frequent_ngram(t.lex, th.phrase_n, known=known)
    # The prompt's own phrase may come back often ("The fastest animal is not the fastest animal").
    dense_count, dense_phrase = ts.dense_ngram(t.lex, th.dense_n, th.dense_window, known=known)
    # Commas, 'and', 'or' do not break a run; a sentence end does ("buoyancy and buoyancy. Buoyancy").
    tight = [u for u in t.seq if u not in (",", "and", "or")]
    rep_n, rep_text = ts.longest_repeated_ngram(t.lex)
    return Repetition(
        loop=ts.longest_loop(t.seq), lines=ts.line_repeats(t.body),
        content_loop=ts.longest_loop(content_seq, most_repeats=True),
        word_run=ts.longest_run([u.text for u in t.units if u.kind == "word"], t.seq),
        phrase_count=phrase_count, phrase=phrase, dense_count=dense_count, dense_phrase=dense_phrase,
        tight_run=ts.longest_run(t.lex, tight), repeat_n=rep_n, repeat_text=rep_text,
        compression=ts.compression_ratio(t.body), top_share=ts.top_share(t.lex))


def _comparable(body: str, prompt: str | None, reference: str | None) -> tuple[str | None, str | None]:
    """The prompt and reference a text's words can be compared with: a Chinese answer to an
    English prompt shares none by nature, so that side is left out (None)."""
    share = ts.cjk_share(body)
    if prompt and abs(ts.cjk_share(prompt) - share) > 0.5:
        prompt = None
    if reference and abs(ts.cjk_share(reference) - share) > 0.5:
        reference = None
    return prompt, reference


def _answer(t: _Split, prompt: str | None, reference: str | None, surprise: Surprise | None,
            th: Thresholds) -> Answer:
    """`prompt` and `reference` as `_comparable` leaves them."""
    body = t.body
    text_stems = ts.content_stems(body)
    prompt_stems = ts.content_stems(prompt, task=True) if prompt else set()
    # Echoed task words ("describe", "sentence") do not make an answer on-topic.
    instr = {s for s in (ts.content_stem(w) for w in ts.INSTRUCTION_WORDS) if s}
    topic = prompt_stems - instr
    ref_stems = (ts.content_stems(reference) if reference else set()) - instr
    on_topic = text_stems & (topic | ref_stems)
    new_content = len(text_stems - prompt_stems - instr)
    question = _question(prompt or "")
    return Answer(
        new_content=new_content, weak_end=_weak_end(body),
        # The whole answer is one short question back ("So what do they eat?").
        asks_back=bool(re.fullmatch(r"[^.!?\n]{1,120}\?\s*", body.strip() + " ")),
        surprising=surprising_tokens(surprise, th.surprise_gap),
        parrot=bool(prompt) and _norm(body) == _norm(prompt or "") and bool(_norm(body)),
        # The prompt said again inside the answer, and nothing added ("Why do birds migrate?
        # The answer is:"): an answer-shaped echo.
        echo_prompt=bool(prompt) and bool(question) and f" {question} " in f" {_norm(body)} " and not new_content,
        broken_ends=_broken_ends(body), fragments=[ln.strip() for ln in t.lines if _is_fragment(ln)],
        dangling=_dangling_lines(t.lines), n_content=len(text_stems),
        relevance=(len(on_topic) / len(text_stems)) if text_stems else 1.0, topic_hits=len(text_stems & topic),
        has_topic=bool(topic), has_reference=bool(reference and reference.strip()), n_reference=len(ref_stems),
        has_prompt=bool(prompt_stems), on_topic=sorted(on_topic))


def measure(text: str, prompt: str | None = None, reference: str | None = None,
            th: Thresholds | None = None, surprise: Surprise | None = None,
            system: str | None = None) -> Measurements:
    """All raw measurements of one text (numbers plus a few examples for messages).

    `system`: the system prompt the export's chat template puts before every prompt, when known."""
    th = th or Thresholds()
    t = _split(text)
    near_prompt, near_reference = _comparable(text, prompt, reference)
    return Measurements(_surface(t, near_prompt, system, th), _lexicon(t, near_prompt, near_reference, th),
                        _repetition(t, prompt, th), _answer(t, near_prompt, near_reference, surprise, th))
