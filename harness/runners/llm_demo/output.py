"""llm_demo's stdout -> generated text per prompt (docs/llm-demo-output.md): the text region
between `prompt file is ...` and the summary block, MNN log lines removed, split per prompt
(see the package doc for when a split is exact)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from harness.catalogue import Entry, load_catalogue
from harness.runners.summary import Summary, find_summary, parse_summary_lines

# MNN log lines that can land inside the generated text on stdout (non-logcat builds): MNN's own
# log prefixes, and the catalogue's lines MNN prints there (harness/catalogue/lines.yaml, by id).
# Searched anywhere in a line: after a max-token stop the next line is glued to the text.
_MNN_PREFIXES = r"\[Error\]: |\[MNN:LLM\] |\[POSDBG\]|MNN_QNN: |QNN: |code=\d+ in \w+, \d+"
_TEXT_LOG_IDS = ("response-failed", "generation-failed", "qnn-call-failed", "broadcast-error", "compute-shape-error",
                 "omni-image-unreadable", "qwen-vl-resize", "module-clone", "qnn-system-context", "qnn-mask-missing")


@lru_cache(maxsize=1)
def _log_line() -> re.Pattern[str]:
    cat = load_catalogue()
    lines = "|".join(f"(?:{cat.entry(i).regex.pattern})" for i in _TEXT_LOG_IDS)
    return re.compile(f"(?:{_MNN_PREFIXES}|{lines})[^\\n]*\\n?")


# Lines that end the current prompt: it failed and printed no EOS newline (the catalogue's lines).
_PROMPT_END_IDS = ("llm-error-state", "response-failed", "generation-failed")


def _ends_prompt(line: str) -> bool:
    return any(e.regex.search(line) for e in _prompt_end_lines())


@lru_cache(maxsize=1)
def _prompt_end_lines() -> tuple[Entry, ...]:
    cat = load_catalogue()
    return tuple(cat.entry(i) for i in _PROMPT_END_IDS)
_PROMPT_FILE_LINE = re.compile(r"^prompt file is [^\n]*\n", re.M)


@dataclass
class PromptOutput:
    prompt: str
    text: str | None  # generated text without the EOS newline; None: did not run or poisoned
    stopped_on_eos: bool | None = None  # False: stopped at the token limit
    errors: list[str] = field(default_factory=list)  # MNN error lines printed during this prompt
    valid: bool = True  # False when the prompt failed, was poisoned or could not be attributed

    def to_json(self) -> dict[str, object]:
        return {"prompt": self.prompt, "text": self.text, "stopped_on_eos": self.stopped_on_eos,
                "errors": self.errors, "valid": self.valid}


@dataclass
class ParsedOutput:
    prompts: list[PromptOutput]
    summary: Summary | None
    summary_source: str | None  # stdout | logcat
    raw_text: str  # the generated-text region with MNN log lines removed
    split_exact: bool
    log_lines: list[str] = field(default_factory=list)  # MNN lines removed from the text region

    @property
    def texts(self) -> list[str | None]:
        return [p.text for p in self.prompts]


def _text_region(stdout: str) -> tuple[str, Summary | None]:
    matches = list(_PROMPT_FILE_LINE.finditer(stdout))
    summary = find_summary(stdout)
    if not matches:
        return "", summary
    start = matches[-1].end()
    end = summary.start if summary is not None and summary.start >= start else len(stdout)
    return stdout[start:end], summary


def parse_output(stdout: str, prompts: Sequence[str] | int | None = None,
                 logcat: Sequence[str] = (), token_limit: int | None = None) -> ParsedOutput:
    """Split one process's stdout into per-prompt texts and find its summary block.

    `prompts`: the prompt texts (or just their number) of this process; None = unknown,
    then every EOS-terminated piece counts as one prompt. `logcat`: message texts of the run.
    `token_limit`: the decode limit of the run (max_token_number or max_new_tokens); a prompt
    whose decode count reached it stopped at the limit even when its last token was a newline.
    """
    names: list[str] | None
    if isinstance(prompts, int):
        names = [""] * prompts
    else:
        names = list(prompts) if prompts is not None else None
    region, summary = _text_region(stdout)
    source = "stdout" if summary else None
    if summary is None and logcat:
        summary = parse_summary_lines(list(logcat))
        source = "logcat" if summary else None
    pieces = _pieces(region)
    raw_text = "".join(s for k, s in pieces if k == "text")
    log_lines = [s for k, s in pieces if k == "log"]
    if names is not None and len(names) == 1:
        out = _one_prompt(names[0], region, raw_text, log_lines, summary, token_limit)
        return ParsedOutput([out], summary, source, raw_text, True, log_lines)
    outs, exact = _named(_split_prompts(pieces), names)
    return ParsedOutput(outs, summary, source, raw_text, exact, log_lines)


def _pieces(region: str) -> list[tuple[str, str]]:
    """The text region as ("text", s) and ("log", MNN line) pieces, in order."""
    pieces: list[tuple[str, str]] = []
    pos = 0
    for m in _log_line().finditer(region):
        if m.start() > pos:
            pieces.append(("text", region[pos:m.start()]))
        pieces.append(("log", m.group().rstrip("\n")))
        pos = m.end()
    if pos < len(region):
        pieces.append(("text", region[pos:]))
    return pieces


def _one_prompt(name: str, region: str, raw_text: str, log_lines: list[str], summary: Summary | None,
                token_limit: int | None) -> PromptOutput:
    """One prompt per process: the whole region is its text (exact)."""
    failed = any(_ends_prompt(s) for s in log_lines)
    eos = raw_text.endswith("\n")
    decoded = summary.decode_tokens if summary is not None else None
    at_limit = token_limit is not None and decoded is not None and decoded >= token_limit
    text = raw_text[:-1] if eos else raw_text
    ran = bool(region) or bool(log_lines)
    return PromptOutput(name, text if ran and not (failed and not text) else None,
                        (eos and not at_limit) if ran and not failed else None, list(log_lines),
                        valid=ran and not failed)


def _split_prompts(pieces: list[tuple[str, str]]) -> list[PromptOutput]:
    """Several prompts in one process: an EOS newline or a failure line ends each; after the
    first failure every later prompt of the process is poisoned."""
    outs: list[PromptOutput] = []
    cur_text = ""
    cur_err: list[str] = []

    def close(eos: bool | None, failed: bool) -> None:
        nonlocal cur_text, cur_err
        outs.append(PromptOutput("", None if failed and not cur_text else cur_text, None if failed else eos,
                                 cur_err, valid=not failed))
        cur_text, cur_err = "", []

    for kind, s in pieces:
        if kind == "log":
            cur_err.append(s)
            if _ends_prompt(s):
                close(None, True)
            continue
        parts = s.split("\n")
        for part in parts[:-1]:
            cur_text += part
            close(True, False)
        cur_text += parts[-1]
    if cur_text or cur_err:
        close(False, False)  # stopped at the token limit: no newline

    poisoned = False
    for o in outs:
        if poisoned:
            o.valid = False
        if not o.valid:
            poisoned = True
    return outs


def _named(outs: list[PromptOutput], names: list[str] | None) -> tuple[list[PromptOutput], bool]:
    """The pieces attributed to the prompts asked (when known) and whether the split is exact."""
    exact = names is None or len(outs) == len(names)
    if names is None:
        return outs, exact
    if len(outs) < len(names) and outs and not outs[-1].valid:
        # The run stopped (rc 255) or later prompts printed nothing: not run.
        outs += [PromptOutput("", None, None, [], valid=False) for _ in range(len(names) - len(outs))]
        exact = True
    if len(outs) != len(names):
        outs = [PromptOutput(n, None, None, [], valid=False) for n in names]
    for o, n in zip(outs, names):
        o.prompt = n
    return outs, exact
