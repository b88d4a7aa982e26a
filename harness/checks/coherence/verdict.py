"""The verdict of the coherence check and the thresholds its rules use (calibrated on
../shared/corpus/coherence-dev.jsonl by benchmarks/coherence_eval.py; docs/coherence.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from harness.findings import Finding

VerdictLabel = Literal["coherent", "garbled"]


class CoherenceKind(StrEnum):
    """What a coherence rule found (docs/coherence.md): decisive rules give ERROR findings,
    suspicious ones WARNING findings whose weights add up."""

    EMPTY = "empty"
    CONTROL_CHARACTERS = "control-characters"
    ECHO = "echo"
    SYSTEM_PROMPT = "system-prompt"
    TEMPLATE_LEAK = "template-leak"
    REPLACEMENT_CHARACTERS = "replacement-characters"
    TOKEN_SOUP = "token-soup"
    REPETITION_LOOP = "repetition-loop"
    SHORT_REPETITION = "short-repetition"
    REPEATED_PHRASE = "repeated-phrase"
    PUNCTUATION_RUN = "punctuation-run"
    STUCK_TOKEN = "stuck-token"
    REPEATED_LINES = "repeated-lines"
    REPEATED_PASSAGE = "repeated-passage"
    OFF_TOPIC = "off-topic"
    INVENTED_WORDS = "invented-words"
    MANGLED_TOKENS = "mangled-tokens"
    DOUBLED_WORDS = "doubled-words"
    BROKEN_END = "broken-end"
    WEAK_END = "weak-end"
    ASKS_BACK = "asks-back"
    DOUBLED_COMMAS = "doubled-commas"
    COMMA_CLOSE = "comma-close"
    SURPRISING = "surprising"
    FRAGMENTS = "fragments"
    DANGLING = "dangling"
    EXPECTATION = "expectation"  # none of the suite's expected words appear


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
    system_leak_words: int = 5         # words in a row copied from the system prompt
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
    asks_back_weight: float = 0.5      # ...that is only a question back ("So what do they eat?")
    weak_end_weight: float = 0.5       # a short answer closed on 'of', 'does', 'to' ("A doctor does.")
    double_comma_weight: float = 0.6   # ",," or ", ," in prose: no writer's slip
    comma_close_weight: float = 0.5    # the model closed its answer (EOS) right after a comma
    # reference model (optional input, harness/checks/surprise.py): tokens far below its best choice
    surprise_gap: float = 6.0          # nats below the reference's best token (healthy sampling: <= 3.0)
    surprise_weight: float = 0.35      # per such token...
    surprise_cap: float = 0.7          # ...never more than this: alone it never decides
    garbled_at: float = 1.0


@dataclass
class TextVerdict:
    verdict: VerdictLabel
    findings: list[Finding] = field(default_factory=list)  # every rule that fired, decisive first
    scores: dict[str, float] = field(default_factory=dict)

    @property
    def coherent(self) -> bool:
        return self.verdict == "coherent"

    @property
    def reasons(self) -> list[str]:
        """Each finding in words (a suspicious one with its weight)."""
        return [f.message for f in self.findings]

    def only(self, kind: CoherenceKind) -> bool:
        """Every finding is of `kind` (and there is one)."""
        return bool(self.findings) and all(f.kind is kind for f in self.findings)

    def to_json(self) -> dict[str, object]:
        return {"verdict": self.verdict, "reasons": list(self.reasons),
                "scores": {k: round(v, 4) for k, v in self.scores.items()}}
