"""`llm_demo` on the host, on the PyPI `mnn` package's `MNN.llm` engine.

Keeps the contract of MNN 3.6.1's `llm_demo` (docs/llm-demo-output.md):
`python -m harness.hostrt.llm_demo CONFIG [PROMPT_FILE] [MAX_TOKENS] [4th]`

- `config path is <CONFIG>`, then the engine's own lines; load failure -> the engine's
  `[Error]: ... not found: ...` and `LLM init error`, exit 0 (as the real one does);
- `prompt file is <PROMPT_FILE>`; missing/empty file -> exit 1; one prompt per line, empty
  lines skipped, a trailing CR dropped, `#` lines skipped; a C-Eval CSV runs C-Eval mode;
- generated text on stdout, `end_with` ("\\n") only when it stopped on EOS;
- MAX_TOKENS < 0: the config's max_new_tokens; 0: prefill only; N > 0: up to N tokens;
- the summary block byte for byte (float arithmetic and glibc's `-nan`/`inf` included),
  summed over prompts from the engine's context;
- internal errors as llm_demo reports them: exit 255 without MAX_TOKENS, and with it the
  `[Error]: LLM in error state. Status: 4` line on the failing prompt and every later one.
- no PROMPT_FILE: interactive chat on stdin (`/exit`, `/reset`).

Differences that cannot be helped: the Python binding has no `tuning()`, so the
`Prepare for tuning opt` and AUTOTIME lines are not printed; text is written per prompt,
not per token; for N > 0 the engine generates N tokens in one call (llm_demo calls
`generate(1)` N times; the token counts are the same).

`mnn` is an optional extra (`pip install 'harness[mnn]'`), imported only when needed.
The wrapper's `Llm.response` prints `[MNNLLM]` lines, so the C object is driven directly.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import re
import struct
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, cast

from harness.errors import HarnessError

PROG = "python -m harness.hostrt.llm_demo"
CEVAL_HEADER = "id,question,A,B,C,D,answer"
CHAT_SYSTEM = "You are a helpful assistant."
EXIT_NO_ENGINE = 2

# LlmStatus (transformers/llm/engine/include/llm/llm.hpp)
RUNNING, NORMAL_FINISHED, MAX_TOKENS_FINISHED, INTERNAL_ERROR = 0, 1, 2, 4

_INT_MIN, _INT_MAX = -(2 ** 31), 2 ** 31 - 1


class EngineUnavailable(HarnessError):
    """The `mnn` package (MNN.llm) is not importable."""


# ----------------------------------------------------------------------------- output

class _Out:
    """stdout shared with the engine's printf: flush ours before it writes, flush its after."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        try:
            self._libc: Any = ctypes.CDLL(None)
        except OSError:   # no dynamic libc (unusual): C output may then come out of order
            self._libc = None

    def write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def line(self, text: str) -> None:
        self.write(text + "\n")

    def sync(self) -> None:
        """Call around engine calls: keeps Python's and C's buffered stdout in order."""
        self.stream.flush()
        if self._libc is not None:
            self._libc.fflush(None)


# ----------------------------------------------------------------------------- summary

def _f32(x: float) -> float:
    """Round to C float (llm_demo keeps the summary numbers in float)."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def _c_div(a: float, b: float) -> float:
    """float / float as C on x86 computes it: x/0 is +-inf, 0/0 is the negative default NaN."""
    a, b = _f32(a), _f32(b)
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return -math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return _f32(a / b)


def c_format(x: float, decimals: int) -> str:
    """printf("%.Nf") as glibc prints it (`-nan`, `nan`, `inf`, `-inf`)."""
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{decimals}f}"


@dataclass
class Totals:
    """What llm_demo's benchmark() sums over prompts, plus the context's media numbers
    (cumulative in the engine, read once at the end)."""

    prompt_len: int = 0
    decode_len: int = 0
    prefill_us: int = 0
    decode_us: int = 0
    sample_us: int = 0
    vision_us: int = 0
    audio_us: int = 0
    pixels_mp: float = 0.0
    audio_input_s: float = 0.0

    def add(self, ctx: Mapping[str, Any]) -> None:
        self.prompt_len += int(ctx.get("prompt_len", 0))
        self.decode_len += int(ctx.get("gen_seq_len", 0))
        self.prefill_us += int(ctx.get("prefill_us", 0))
        self.decode_us += int(ctx.get("decode_us", 0))
        self.sample_us += int(ctx.get("sample_us", 0))

    def take_media(self, ctx: Mapping[str, Any]) -> None:
        self.vision_us = int(ctx.get("vision_us", 0))
        self.audio_us = int(ctx.get("audio_us", 0))
        self.pixels_mp = float(ctx.get("pixels_mp", 0.0))
        self.audio_input_s = float(ctx.get("audio_input_s", 0.0))


def format_summary(t: Totals) -> str:
    """The performance block exactly as llm_demo prints it (leading newline included)."""
    vision_s = _f32(t.vision_us / 1e6)
    audio_s = _f32(t.audio_us / 1e6)
    prefill_s = _f32(t.prefill_us / 1e6)
    decode_s = _f32(t.decode_us / 1e6)
    sample_s = _f32(t.sample_us / 1e6)
    pixels_mp = _f32(t.pixels_mp)
    audio_input_s = _f32(t.audio_input_s)
    vision_speed = _c_div(pixels_mp, vision_s) if pixels_mp > 0.0 else 0.0
    def f2(x: float) -> str:
        return c_format(x, 2)

    return (
        "\n" + "#" * 33 + "\n"
        f"prompt tokens num = {t.prompt_len}\n"
        f"decode tokens num = {t.decode_len}\n"
        f" vision time = {f2(vision_s)} s\n"
        f" pixels_mp = {f2(pixels_mp)} MP\n"
        f"  audio process time = {f2(audio_s)} s\n"
        f"  audio input time = {f2(audio_input_s)} s\n"
        f"prefill time = {f2(prefill_s)} s\n"
        f" decode time = {f2(decode_s)} s\n"
        f" sample time = {f2(sample_s)} s\n"
        f"prefill speed = {f2(_c_div(t.prompt_len, prefill_s))} tok/s\n"
        f" decode speed = {f2(_c_div(t.decode_len, decode_s))} tok/s\n"
        f" vision speed = {c_format(vision_speed, 3)} MP/s\n"
        f" audio RTF = {c_format(_c_div(audio_s, audio_input_s), 3)} \n"
        + "#" * 34 + "\n"
    )


# ----------------------------------------------------------------------------- arguments and prompts

def parse_max_tokens(text: str) -> int:
    """`std::istringstream(text) >> int`: leading integer, 0 when there is none, clamped."""
    m = re.match(r"\s*([+-]?\d+)", text)
    if not m:
        return 0
    return max(_INT_MIN, min(_INT_MAX, int(m.group(1))))


def read_prompt_lines(path: str | Path) -> list[str]:
    """Prompts the way eval() collects them (std::getline): empty lines skipped, then one
    trailing CR dropped. A file that cannot be opened gives no prompts."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()   # getline does not return the empty piece after a final newline
    prompts = []
    for raw in lines:
        if not raw:
            continue
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        prompts.append(raw.decode("utf-8", errors="replace"))
    return prompts


def parse_ceval_csv(lines: Sequence[str]) -> list[list[str]]:
    """C-Eval CSV as llm_demo reads it: quotes toggle quoting, "" inside quotes is a quote,
    commas and newlines split only outside quotes."""
    content = "".join(line + "\n" for line in lines)
    rows: list[list[str]] = []
    row: list[str] = []
    cell: list[str] = []
    quoted = False
    i = 0
    while i < len(content):
        c = content[i]
        if c == '"':
            if quoted and content[i + 1:i + 2] == '"':
                cell.append('"')
                i += 1
            else:
                quoted = not quoted
        elif c == "," and not quoted:
            row.append("".join(cell))
            cell = []
        elif (c == "\n" or i == len(content) - 1) and not quoted:
            row.append("".join(cell))
            rows.append(row)
            row, cell = [], []
        else:
            cell.append(c)
        i += 1
    return rows


# ----------------------------------------------------------------------------- engine

def _import_llm() -> Any:
    try:
        import MNN.llm as mnn_llm  # prints the engine's CPU-feature line, as llm_demo does at load
    except ImportError as exc:
        raise EngineUnavailable(
            f"the PyPI `mnn` package is not importable ({exc}); the host llm_demo needs its MNN.llm "
            f"engine: pip install 'harness[mnn]' (or pip install mnn)") from None
    return mnn_llm


@dataclass(frozen=True)
class PromptResult:
    """One prompt's run: `text` is exactly what llm_demo writes to stdout for it."""

    text: str
    output_tokens: tuple[int, ...]
    status: int
    prompt_len: int
    gen_seq_len: int
    prefill_us: int
    decode_us: int
    sample_us: int

    @property
    def stopped_on_eos(self) -> bool:
        return self.status == NORMAL_FINISHED


@dataclass
class HostEngine:
    """One `MNN.llm` engine driven like llm_demo drives `Llm` (C object, no wrapper printing).

    `overrides` are merged with set_config before load, as llm_demo's `tmp_path` is: that is
    also what makes the engine parse `chunk_limits`/`chunk` from the config at all.
    """

    config_path: str
    overrides: Mapping[str, object] = field(default_factory=dict)
    tmp_path: str = "tmp"   # llm_demo 3.6.1: relative to the cwd
    out: _Out | None = None

    def __post_init__(self) -> None:
        bad = [k for k, v in self.overrides.items() if v is None]
        if bad:
            raise HarnessError(f"config overrides {bad} are null: the engine cannot delete a key; "
                               f"write a config without it instead")
        self._sync = self.out.sync if self.out is not None else (lambda: None)
        mnn_llm = _import_llm()
        self._sync()
        self._c = mnn_llm.create(self.config_path, False)._c_obj
        self._loaded = False
        self._use_template = True

    # -- configuration
    def set_config(self, cfg: Mapping[str, object]) -> None:
        self._c.set_config(json.dumps(dict(cfg)))

    def load(self) -> bool:
        """set_config(tmp_path + overrides), load. False when the engine refused (it has printed why)."""
        self.set_config({"tmp_path": self.tmp_path, **self.overrides})
        self._sync()
        self._loaded = bool(self._c.load())
        self._sync()
        if self._loaded:
            try:
                self._use_template = bool(json.loads(self._c.dump_config()).get("use_template", True))
            except (ValueError, TypeError):
                self._use_template = True
        return self._loaded

    def config(self) -> dict[str, object]:
        """The engine's merged config (config.json + llm_config.json + set_config)."""
        return cast(dict[str, Any], json.loads(self._c.dump_config()))

    # -- state
    def context(self) -> dict[str, Any]:
        return dict(self._c.get_context())

    @property
    def status(self) -> int:
        return int(self._c.get_context().get("status", RUNNING))

    def stopped(self) -> bool:
        """The engine's stoped(); in the error state it prints `[Error]: LLM in error state...`."""
        self._sync()
        res = bool(self._c.stoped())
        self._sync()
        return res

    def reset(self) -> None:
        self._c.reset()

    # -- generation
    def encode(self, prompt: str | list[dict[str, str]]) -> list[int]:
        """Token ids the way Llm::response builds them (chat template unless use_template is off)."""
        if not self._loaded:
            raise HarnessError(f"{self.config_path}: the engine is not loaded; call load() first")
        text = self._c.apply_chat_template(prompt) if (self._use_template or not isinstance(prompt, str)) else prompt
        return list(self._c.tokenizer_encode(text))

    def run(self, prompt: str | list[dict[str, str]], max_new_tokens: int = -1) -> PromptResult:
        """Generate for one prompt: -1 = the config's max_new_tokens, 0 = prefill only."""
        ids = self.encode(prompt)
        self._sync()
        self._c.generate_init(None, "\n")
        self._c.generate(ids, int(max_new_tokens))
        self._sync()
        ctx = self.context()
        status = int(ctx.get("status", RUNNING))
        text = str(ctx.get("generate_str", ""))
        if status == NORMAL_FINISHED:
            text += str(ctx.get("end_with", ""))
        return PromptResult(text=text, output_tokens=tuple(ctx.get("output_tokens", ())), status=status,
                            prompt_len=int(ctx.get("prompt_len", 0)), gen_seq_len=int(ctx.get("gen_seq_len", 0)),
                            prefill_us=int(ctx.get("prefill_us", 0)), decode_us=int(ctx.get("decode_us", 0)),
                            sample_us=int(ctx.get("sample_us", 0)))


# ----------------------------------------------------------------------------- library entry

def run_prompts_detailed(config_path: str | Path, prompts: Sequence[str], max_tokens: int = -1,
                         overrides: Mapping[str, object] | None = None) -> list[PromptResult]:
    """Load the export once and run each prompt (greedy or not, as the config says)."""
    engine = HostEngine(str(config_path), dict(overrides or {}))
    if not engine.load():
        raise HarnessError(f"{config_path}: the MNN engine could not load this export "
                           f"(its [Error] line on stdout says which file); fix the export folder or config")
    engine.set_config({"async": False})
    return [engine.run(p, max_tokens) for p in prompts]


# ----------------------------------------------------------------------------- llm_demo

def _benchmark(engine: HostEngine, out: _Out, prompts: Sequence[str], max_tokens: int) -> int:
    totals = Totals()
    for prompt in prompts:
        if prompt.startswith("#"):
            continue
        if engine.status == INTERNAL_ERROR:
            # Llm::response checks the state first and returns; the loop's stoped() says it again.
            # The context still holds the failed prompt's numbers and llm_demo adds them again.
            out.line(f"[Error]: LLM in error state. Status: {INTERNAL_ERROR}")
            if max_tokens < 0:
                out.line("Error: Response generation failed due to internal error")
                return 255
            engine.stopped()
            totals.add(engine.context())
            continue
        res = engine.run(prompt, max_tokens)
        out.write(res.text)
        if res.status == INTERNAL_ERROR:
            if max_tokens < 0:
                out.line("Error: Response generation failed due to internal error")
                return 255
            if max_tokens > 0 and res.gen_seq_len > 0:   # failed in a decode step
                out.line("Error: Generation failed due to internal error")
                return 255
            engine.stopped()   # failed in prefill: the engine prints the error-state line
        totals.add(engine.context())
    totals.take_media(engine.context())
    out.write(format_summary(totals))
    return 0


def _ceval(engine: HostEngine, out: _Out, lines: Sequence[str], prompt_file: str) -> int:
    rows = parse_ceval_csv(lines)
    answers: list[str] = []
    for i, row in enumerate(rows[1:], start=1):
        if len(row) < 6:
            print(f"[Error]: {prompt_file}: C-Eval row {i} has {len(row)} fields, needs "
                  f"id,question,A,B,C,D", file=sys.stderr)
            return 1
        prompt = f"{row[1]}\n\nA. {row[2]}\nB. {row[3]}\nC. {row[4]}\nD. {row[5]}\n\n"
        out.write(prompt)
        out.line(f"## 进度: {i} / {len(lines) - 1}")
        answer = engine.run(prompt, -1).text
        out.write(answer)
        answers.append(answer)
    name = os.path.basename(prompt_file)
    name = name.replace("_val", "_res", 1)
    out.line(f"store to {name}")
    with open(name, "w", encoding="utf-8") as fp:
        fp.write("id,answer\n")
        fp.writelines(f'{i},"{a}"\n' for i, a in enumerate(answers))
    return 0


def _chat(engine: HostEngine, out: _Out, stdin: TextIO) -> int:
    messages = [{"role": "system", "content": CHAT_SYSTEM}]
    while True:
        out.write("\nUser: ")
        line = stdin.readline()
        if line == "":   # EOF (llm_demo would spin on empty input forever)
            return 0
        user = line.rstrip("\n")
        if user == "/exit":
            return 0
        if user == "/reset":
            engine.reset()
            messages = [{"role": "system", "content": CHAT_SYSTEM}]
            out.line("\nA: reset done.")
            continue
        messages.append({"role": "user", "content": user})
        out.write("\nA: ")
        res = engine.run(list(messages), -1)
        out.write(res.text)
        messages.append({"role": "assistant", "content": str(engine.context().get("generate_str", ""))})


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None,
         stdin: TextIO | None = None) -> int:
    """llm_demo's main(); `argv` excludes the program name. Returns the exit code.
    `stdout` only redirects this module's lines: the engine's own printf output always goes to fd 1."""
    args = list(sys.argv[1:] if argv is None else argv)
    out = _Out(stdout or sys.stdout)
    if not args:
        out.line(f"Usage: {PROG} config.json <prompt.txt>")
        return 0
    config_path = args[0]
    out.line(f"config path is {config_path}")
    try:
        engine = HostEngine(config_path, out=out)
    except EngineUnavailable as exc:
        print(f"[Error]: {exc}", file=sys.stderr)
        return EXIT_NO_ENGINE
    if not engine.load():
        out.line("LLM init error")
        return 0
    if len(args) < 2:
        return _chat(engine, out, stdin or sys.stdin)
    max_tokens = parse_max_tokens(args[2]) if len(args) >= 3 else -1
    if len(args) >= 4:
        out.line("Set not thinking, only valid for Qwen3")
        engine.set_config({"jinja": {"context": {"enable_thinking": False}}})
    prompt_file = args[1]
    engine.set_config({"async": False})
    out.line(f"prompt file is {prompt_file}")
    prompts = read_prompt_lines(prompt_file)
    if not prompts:
        return 1
    if prompts[0] == CEVAL_HEADER:
        return _ceval(engine, out, prompts, prompt_file)
    return _benchmark(engine, out, prompts, max_tokens)


if __name__ == "__main__":
    sys.exit(main())
