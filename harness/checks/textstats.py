"""Text measurements shared by the coherence and agreement checks.

Pure functions over a string: tokenization (Latin words, numbers, punctuation,
single CJK characters), word-frequency look-ups through `wordfreq`, repetition
and relevance measures. No verdicts here: `checks/coherence/` turns numbers into rules.

Chinese needs no extra package: wordfreq's own zh list and its
traditional->simplified table are read directly (its tokenizer would need jieba).
"""

from __future__ import annotations

import gzip
import math
import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

import msgpack
import wordfreq
from wordfreq.util import data_path

# -- character classes -------------------------------------------------------

_CJK_RANGES = (
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
    (0x20000, 0x2A6DF), (0x2A700, 0x2EBEF), (0x30000, 0x3134F),
)


def is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def is_control(ch: str) -> bool:
    """Control, unassigned, private-use or surrogate code points (tab/newline/CR allowed)."""
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cn", "Co", "Cs")


# -- tokens --------------------------------------------------------------------

# Latin-script words (letters incl. accented; apostrophes inside), numbers, CJK chars,
# then any other visible symbol as its own unit.
_UNIT_RE = re.compile(
    r"(?P<word>[^\W\d_]+(?:['’][^\W\d_]+)*)|(?P<num>\d+(?:[.,]\d+)*)|(?P<other>\S)"
)
# Social-media and link tokens carry no language signal: dropped before word checks.
_SKIP_RE = re.compile(r"(?:(?<=\s)|^)(?:[#@][\w-]+|https?://\S+|www\.\S+|\S+@\S+\.\w+)")


@dataclass(frozen=True)
class Unit:
    kind: str  # 'word' | 'num' | 'cjk' | 'other'
    text: str  # lowercased for words


def units(text: str) -> list[Unit]:
    """Split text into comparable units; CJK runs become one unit per character."""
    out: list[Unit] = []
    for m in _UNIT_RE.finditer(text):
        if m.lastgroup == "word":
            word = m.group()
            if any(is_cjk(c) for c in word):
                # A CJK run may be glued to Latin letters ("AI模型"): split per script.
                buf = ""
                for c in word:
                    if is_cjk(c):
                        if buf:
                            out.append(Unit("word", buf.lower()))
                            buf = ""
                        out.append(Unit("cjk", c))
                    else:
                        buf += c
                if buf:
                    out.append(Unit("word", buf.lower()))
            else:
                out.append(Unit("word", word.lower().replace("’", "'")))
        elif m.lastgroup == "num":
            out.append(Unit("num", m.group()))
        else:
            out.append(Unit("other", m.group()))
    return out


def strip_social(text: str) -> str:
    return _SKIP_RE.sub(" ", text)


def words(text: str) -> list[str]:
    """Lowercased Latin-script words of `text` (hashtags, mentions, links removed)."""
    return [u.text for u in units(strip_social(text)) if u.kind == "word"]


def cjk_chars(text: str) -> list[str]:
    return [c for c in text if is_cjk(c)]


def cjk_share(text: str) -> float:
    """Share of CJK characters among letters (CJK + Latin letters)."""
    cjk = sum(1 for c in text if is_cjk(c))
    latin = sum(1 for c in text if c.isalpha() and not is_cjk(c))
    return cjk / (cjk + latin) if cjk + latin else 0.0


# -- word frequencies ----------------------------------------------------------

@lru_cache(maxsize=1)
def _zh_freqs() -> dict[str, float]:
    # Loaded once per process, and only for Chinese text: 330k entries (about 0.2 s).
    return wordfreq.get_frequency_dict("zh")


@lru_cache(maxsize=1)
def _zh_simplify() -> dict[int, str]:
    """Traditional -> simplified character table that wordfreq ships (str.translate map)."""
    with gzip.open(data_path("_chinese_mapping.msgpack.gz")) as fh:
        return cast(dict[int, str], msgpack.load(fh, raw=False, strict_map_key=False))


@lru_cache(maxsize=65536)
def zipf_en(word: str) -> float:
    """Zipf frequency of an English word (0 when unknown)."""
    return wordfreq.zipf_frequency(word, "en")


def zipf_zh(token: str) -> float:
    """Zipf frequency of a Chinese character or word, traditional forms folded to simplified."""
    f = _zh_freqs().get(token.translate(_zh_simplify()))
    return math.log10(f) + 9.0 if f else 0.0


# Function words: their share tells running prose from a bag of content words.
FUNCTION_WORDS = frozenset(
    """a an the of to in on at for with by from into onto about over under after before between
    through during without within and or but nor so yet if then than as because while although
    is are was were be been being am do does did have has had having will would shall should can
    could may might must it its it's this that these those i you he she we they me him her us
    them my your his our their mine yours what which who whom whose how why when where there here
    not no all any some each every such more most other very just also only too i'm you're
    don't can't isn't it'll let's that's there's what's""".split()
)

# Prompt words that describe the task rather than its topic ("Describe a cat" -> cat).
INSTRUCTION_WORDS = frozenset(
    """describe explain write give tell list summarize summarise name define answer briefly brief
    short long simple simply sentence sentences word words paragraph paragraphs one two three four
    five six seven ten poem story recipe fact facts tip tips example examples way ways using use
    without please me child kid kids friendly new main key important common difference compare
    between used does work make makes why what how who""".split()
)


def content_stem(word: str) -> str | None:
    """Crude stem of a content word, or None for function/short words.

    Plural and possessive endings are dropped, then the word is cut to 6 letters so
    that describe/description, scramble/scrambled, elephant/elephants meet.
    """
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = w.strip("'")
    if len(w) < 3 or w in FUNCTION_WORDS or not w.isalpha():
        return None
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")) and len(w) > 3:
        w = w[:-1]
    return w[:6]


# Chinese grammar characters and task words, left out of relevance like English function words.
CJK_FUNCTION_CHARS = frozenset("的地得了着过是在和与及或也都就而且但并不没有个们这那其之此我你他她它"
                               "吗呢吧啊呀么一上下中里为以被把对从到向给让会能要可很更最还又")
CJK_INSTRUCTION_WORDS = ("为什么", "什么", "怎么", "如何", "请", "介绍", "一下", "描述", "解释", "说明",
                         "简单", "简短", "简要", "写", "首", "句话", "句", "给出", "列出", "告诉",
                         "關於", "关于", "介紹", "描寫", "解釋", "說明", "簡單")


def content_stems(text: str, *, task: bool = False) -> set[str]:
    """Content stems of Latin words plus CJK character bigrams (Chinese has no spaces).

    Bigrams made only of grammar characters (是一, 我们) are skipped; traditional characters
    are folded to simplified. With `task=True` (a prompt) Chinese task words such as
    介绍/描述/写 are dropped first.
    """
    stems = {s for s in (content_stem(w) for w in words(text)) if s}
    if task:
        for w in CJK_INSTRUCTION_WORDS:
            text = text.replace(w, " ")
    if any(is_cjk(c) for c in text):
        text = text.translate(_zh_simplify())
    for run in re.findall(r"[\u3400-\u9fff\uf900-\ufaff]+", text):
        if len(run) == 1 and run not in CJK_FUNCTION_CHARS:
            stems.add(run)
        stems.update(run[i:i + 2] for i in range(len(run) - 1)
                     if not (run[i] in CJK_FUNCTION_CHARS and run[i + 1] in CJK_FUNCTION_CHARS))
    return stems


# -- repetition ----------------------------------------------------------------

@dataclass(frozen=True)
class Loop:
    period: int        # units in one repetition
    repeats: float     # how many times the pattern occurs back to back
    span: int          # units covered
    pattern: str       # one repetition, joined


def _loop_key(loop: Loop, most_repeats: bool) -> tuple[float, ...]:
    if most_repeats:
        return (loop.repeats, loop.span, -loop.period)
    return (loop.span, -loop.period)


def longest_loop(seq: list[str], max_period: int = 20, most_repeats: bool = False) -> Loop | None:
    """The widest back-to-back repetition of a pattern that holds a letter, digit or CJK char.

    Pure-punctuation patterns ("| --- | --- |") are table or rule markup, not loops.
    With `most_repeats` the loop turned most often wins ("dry ice" x3 over a passage x2).
    """
    best: Loop | None = None
    n = len(seq)
    for p in range(1, min(max_period, n // 2) + 1):
        i = 0
        while i + p < n:
            if seq[i] != seq[i + p]:
                i += 1
                continue
            j = i
            while j + p < n and seq[j] == seq[j + p]:
                j += 1
            span = (j - i) + p
            pattern = seq[i:i + p]
            # Only a pattern seen at least twice in full is a repetition.
            if span >= 2 * p and any(any(c.isalnum() for c in tok) for tok in pattern):
                cand = Loop(p, span / p, span, " ".join(pattern))
                if best is None or _loop_key(cand, most_repeats) > _loop_key(best, most_repeats):
                    best = cand
            i = j + 1
    return best


def longest_repeated_ngram(seq: list[str], min_n: int = 2) -> tuple[int, str]:
    """Length and text of the longest n-gram that occurs twice without overlapping."""
    best_n, best_text = 0, ""
    n = min_n
    while n <= len(seq) // 2:
        seen: dict[tuple[str, ...], int] = {}
        found = None
        for i in range(len(seq) - n + 1):
            gram = tuple(seq[i:i + n])
            first = seen.setdefault(gram, i)
            if i - first >= n:
                found = gram
                break
        if found is None:
            break
        best_n, best_text = n, " ".join(found)
        n += 1
    return best_n, best_text


@dataclass(frozen=True)
class LineRepeats:
    lines: int         # lines holding a letter, digit or CJK character
    run: int           # most copies of one line back to back
    run_line: str      # that line
    duplicates: int    # lines that repeat an earlier line anywhere in the text


def line_repeats(text: str) -> LineRepeats:
    """Repeated lines: 'Thursday\\nThursday\\nThursday\\nFriday' is a loop of a few units.

    Lines are compared after list markers, case and outer punctuation are dropped, so
    '1. Add lemon' and '2. Add lemon.' count as one line. Layout lines (rules, fences)
    hold no letter and are left out.
    """
    norm = []
    for raw in text.split("\n"):
        s = re.sub(r"^\s*(?:\d+[.)]|[-*•+>#]+)\s*", "", raw).strip().strip(".,;:!?*_\"'`").lower()
        s = " ".join(s.split())
        if any(c.isalnum() for c in s):
            norm.append(s)
    run, run_line, cur = (1, norm[0], 1) if norm else (0, "", 0)
    for a, b in zip(norm, norm[1:]):
        cur = cur + 1 if a == b else 1
        if cur > run:
            run, run_line = cur, b
    seen: set[str] = set()
    dups = 0
    for s in norm:
        dups += s in seen
        seen.add(s)
    return LineRepeats(len(norm), run, run_line, dups)


def dense_ngram(seq: list[str], n: int, window: int, known: AbstractSet[str] = frozenset()) -> tuple[int, str]:
    """Most (non-overlapping) copies of one n-gram (two content words, not all `known`) within
    `window` units."""
    best, best_text = 0, ""
    where: dict[tuple[str, ...], list[int]] = {}
    for i in range(len(seq) - n + 1):
        gram = tuple(seq[i:i + n])
        content = [t for t in gram if t not in FUNCTION_WORDS and t.isalpha()]
        if len(content) < 2 or all(t in known for t in content):
            continue   # "the safety of ..., the safety of ..." is parallel phrasing
        pos = where.setdefault(gram, [])
        if pos and i - pos[-1] < n:
            continue
        pos.append(i)
        inside = [p for p in pos if p > i - window]
        if len(inside) > best:
            best, best_text = len(inside), " ".join(gram)
    return best, best_text


_TEMPLATE_RE = re.compile(
    r"<\|(?:im_start|im_end|endoftext|eot_id|begin_of_text|start_header_id|end_header_id|system|user|assistant)\|>"
    r"|\[/?INST\]|<</?SYS>>|<(?:start|end)_of_turn>"
    # "You are a helpful AI assistant", "You're a helpful AI named", "You are an AI, designed...":
    # the system prompt's way of talking to the model, not an answer to the user.
    r"|\byou(?: are|'re|’re) (?:a|an) (?:[\w-]+ ){0,3}(?:AI|assistant)"
    r"(?: (?:assistant|system|model))?(?=[,.;:!]| (?:named|designed|trained|created|built|here)\b)", re.I)


def template_leaks(text: str) -> list[str]:
    """Chat-template text in an answer: role markers (<|im_start|>, [INST]) or the system
    prompt's own wording ('You are a helpful AI assistant named SmolLM'): the model is
    reading back its context, not answering."""
    return [m.group() for m in _TEMPLATE_RE.finditer(text)]


def shared_run(text: str, source: str) -> str:
    """The longest run of words `text` copies from `source`, in order ('' when none)."""
    a, b = words(text), words(source)
    best, end = 0, 0
    prev = [0] * (len(b) + 1)
    for i in range(1, len(a) + 1):
        cur = [0] * (len(b) + 1)
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                cur[j] = prev[j - 1] + 1
                if cur[j] > best:
                    best, end = cur[j], i
        prev = cur
    return " ".join(a[end - best:end])


def unpossessive(word: str) -> str:
    return word[:-2] if word.endswith("'s") else word


def glued_pair(word: str) -> bool:
    """'thesystem': a word no list knows that is two common words written together."""
    if zipf_en(word) > 0.0:
        return False
    return any(zipf_en(word[:i]) >= 4.0 and zipf_en(word[i:]) >= 4.0
               for i in range(3, len(word) - 2))


def longest_run(candidates: list[str], seq: list[str]) -> tuple[int, str]:
    """Most copies of one word written in a row in `seq` (nothing between), among `candidates`."""
    wanted = set(candidates)
    best, best_tok, cur = 0, "", 0
    for i, tok in enumerate(seq):
        cur = cur + 1 if i and tok == seq[i - 1] else 1
        if tok in wanted and cur > best:
            best, best_tok = cur, tok
    return best, best_tok


def most_frequent_ngram(seq: list[str], n: int, known: AbstractSet[str] = frozenset()) -> tuple[int, str]:
    """How often the most frequent n-gram occurs (non-overlapping), and its text. An n-gram whose
    content words all come from `known` (the prompt: 'a bird singing in a tree') may recur."""
    last: dict[tuple[str, ...], int] = {}
    counts: Counter[tuple[str, ...]] = Counter()
    for i in range(len(seq) - n + 1):
        gram = tuple(seq[i:i + n])
        if not any(any(c.isalnum() for c in t) for t in gram):
            continue
        content = [t for t in gram if t not in FUNCTION_WORDS and t.isalpha()]
        if content and all(t in known for t in content):
            continue
        if gram not in last or i - last[gram] >= n:
            counts[gram] += 1
            last[gram] = i
    if not counts:
        return 0, ""
    gram, count = counts.most_common(1)[0]
    return count, " ".join(gram)


_STUCK_RE = re.compile(r"([^\W\d_]{3,}?)\1{2,}")


def stuck_token(word: str) -> bool:
    """A word made of one piece three times or more: 'bulletbulletbullet', 'angedangedanged'."""
    m = _STUCK_RE.search(word)
    return bool(m) and zipf_en(word) < 1.0


_DOUBLED_RE = re.compile(r"\b([^\W\d_]+)\s+\1\b", re.I)
_GRAMMAR_DOUBLES = frozenset({"had", "that", "is", "do"})  # "what it is is", "that that"


def doubled_words(text: str) -> list[str]:
    """Words written twice in a row ('ready ready', 'a a'); 'had had', 'that that' are grammar."""
    out = []
    for m in _DOUBLED_RE.finditer(text):
        w = m.group(1).lower()
        if w in _GRAMMAR_DOUBLES or len(w) < 3 and w not in ("a", "an"):
            continue   # single letters are list labels
        out.append(w)
    return out


def compression_ratio(text: str) -> float:
    raw = text.encode("utf-8")
    return len(zlib.compress(raw, 9)) / len(raw) if raw else 1.0


def top_share(seq: list[str]) -> float:
    """Share of the most frequent unit (a loop on one token drives it up)."""
    if not seq:
        return 0.0
    return Counter(seq).most_common(1)[0][1] / len(seq)
