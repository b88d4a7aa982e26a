"""The virtual lab's `llm_logits_diff`: same arguments, output format and failure modes as MNN's
(transformers/llm/engine/demo/llm_logits_diff.cpp, MNN master 4d40bdbd; format and real
observations in docs/logits-diff.md).

    llm_logits_diff configA.json configB.json prompt.txt [max_tokens]

A's scripted answer (virtual_behaviour.json, resolved for A's pair) is the teacher: one row per
token, then the `<|im_end|>` stop row. How B's logits differ from A's comes from each answer's
`logits` mode (virtual_lab.exports.behaviour): the worse of A's and B's decides the rows ("exact" rows are
bit-identical; "close" small differences; "saturated" most steps flip; "null" B's forward
returns nothing). Numbers are drawn from a generator seeded by the prompt and both pairs, so a
run is repeatable. As the real tool: when the prompt is longer than a config's prefill chunk,
step 0 differs (the chunked-forward artefact) while later steps are unaffected. An answer
scripted with `posdbg: chunk_local_bug` plays the chunk-local mRoPE fault: a config that
splits an image prompt into chunks gets positions wrong, so its rows disagree from the first
generated token on (right after the image) while a one-chunk config is unaffected.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import re
from collections.abc import Mapping
from typing import Any

from virtual_lab.runtime.devenv import Output, device_facts, die
from virtual_lab.runtime.llm_demo import (
    RUN_FAULTS,
    Engine,
    Model,
    _check_files,
    _check_qnn,
    _chunk_limits,
    _load_config,
    prompt_tokens,
)

VOCAB = 151936
STOP_TEXT = "<|im_end|>"
_TOKEN_RE = re.compile(r"\s*(?:\w+|[^\w\s])")
_SEVERITY = {"exact": 0, "close": 1, "saturated": 2, "null": 3}
_ROW_FMT = "{:4d} | {:6d} {:6d} {} | {:7.4f} {:7.4f} | {:9.5f} {:11.7f} | {}\n"


def _token_id(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") % VOCAB


def _load(arg: str, out: Output, facts, rpath: tuple[str, ...]) -> Model | None:
    model = _load_config(arg, out)
    if not (_check_files(model, out) and _check_qnn(model, facts, out, os.environ, rpath)):
        return None
    return model


def _prompt(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().rstrip("\n")
    except OSError:
        return None


def _mode(model: Model, prompt: str) -> tuple[str, Any]:
    from virtual_lab import exports

    answer = exports.resolve_answer(model.behaviour, prompt, model.pair)
    return answer.logits_mode(model.pair), answer


def main(argv: list[str], build: Mapping[str, Any] | None = None) -> int:
    build = dict(build or {})
    facts = device_facts()
    out = Output(logcat=bool(build.get("logcat_only")) or facts.logcat_only)
    prog = argv[0] if argv else "llm_logits_diff"
    if len(argv) < 4:
        out.cout(f"Usage: {prog} configA.json configB.json prompt.txt [max_tokens]\n")
        return 1
    max_tokens = 32
    if len(argv) >= 5:
        if not re.fullmatch(r"\d+", argv[4]) or int(argv[4]) < 1:
            out.cout(f"Invalid max_tokens: {argv[4]} (must be a positive integer)\n")
            return 1
        max_tokens = int(argv[4])
    out.mnn_print("The device supports: i8sdot:1, fp16:1, i8mm: 1, sve2: 0, sme2: 0\n")
    rpath = (os.path.dirname(os.path.realpath(prog)),) if build.get("rpath_origin") else ()
    models = []
    for arg, tmp in ((argv[1], "tmp_diff_a"), (argv[2], "tmp_diff_b")):
        model = _load(arg, out, facts, rpath)
        if model is None:
            out.cout("load failed\n")
            return 1
        try:  # {"tmp_path": "tmp_diff_a"}: relative to the cwd
            os.makedirs(tmp, exist_ok=True)
        except OSError:
            pass
        models.append(model)
    a, b = models
    prompt = _prompt(argv[3])
    if prompt is None:
        out.cout(f"Failed to open prompt file: {argv[3]}\n")
        return 1
    return _compare(a, b, prompt, max_tokens, out)


def _compare(a: Model, b: Model, prompt: str, max_tokens: int, out: Output) -> int:
    n_prompt = prompt_tokens(prompt, a.llm_config)
    mode_a, answer_a = _mode(a, prompt)
    mode_b, answer_b = _mode(b, prompt)
    mode = max(mode_a, mode_b, key=_SEVERITY.__getitem__)
    if answer_b.fault in ("crash", "abort"):
        die(answer_b.fault)
    limits_b = _chunk_limits(b, out)
    engine_b = Engine(b, out, None, limits_b)
    if _chunk_local(a, answer_a, prompt, n_prompt, out) != _chunk_local(b, answer_b, prompt, n_prompt, out):
        mode = max(mode, "saturated", key=_SEVERITY.__getitem__)
    if answer_b.fault in RUN_FAULTS or (b.llm_on_qnn and not engine_b._chunks_fit(n_prompt)):
        mode = "null"  # the forward that fails in llm_demo with a shape error returns nothing here
    out.cout(f"prompt tokens: {n_prompt}, max new tokens: {max_tokens}\n")
    out.cout("step | tokA(argmaxA) tokB(argmaxB) agree | marginA marginB | maxAbsDiff meanAbsDiff | text\n")
    if mode == "null":
        out.cout("forward returned null at step 0\n")
        out.cout("\nsummary: argmax disagreements=0, first at step -1, worst maxAbsDiff=0.00000\n")
        return 0

    tokens = [t for t in _TOKEN_RE.findall(answer_a.text)] + [STOP_TEXT]
    chunks = [max(x) for x in (_chunk_limits(a, out), limits_b) if x]
    artefact = bool(chunks) and n_prompt > min(chunks) and _chunks_differ(a, b, out)
    # Seeded without the image file names (run folders name them freshly): repeatable runs.
    stable = re.sub(r"<img>.*?(<hw>.*?</hw>)?</img>", lambda m: f"<img>{m.group(1) or ''}</img>", prompt, flags=re.S)
    seed = hashlib.sha256(f"{stable}\0{a.pair}\0{b.pair}\0{mode}".encode()).digest()
    rng = random.Random(seed)
    disagreements, first, worst = 0, -1, 0.0
    kl_sum = nll_a_sum = nll_b_sum = 0.0
    steps = 0
    for i, text in enumerate(tokens[:max_tokens]):
        tok_a = _token_id(text)
        margin_a = rng.uniform(0.3, 5.5)
        nll_a = rng.uniform(0.05, 0.9)
        if artefact and i == 0:
            row_mode = "artefact"
        elif mode == "saturated" and i >= 1:
            row_mode = "saturated"
        else:
            row_mode = "exact" if mode == "exact" else "close"
        if row_mode == "exact":
            tok_b, margin_b, max_d, mean_d, kl, nll_b = tok_a, margin_a, 0.0, 0.0, 0.0, nll_a
        elif row_mode == "close":
            tok_b, margin_b = tok_a, max(0.0, margin_a * rng.uniform(0.85, 1.15))
            max_d, mean_d = rng.uniform(0.8, 2.4), rng.uniform(0.15, 0.45)
            kl, nll_b = rng.uniform(0.005, 0.025), nll_a + rng.uniform(-0.03, 0.045)
        elif row_mode == "artefact":
            tok_b, margin_b = _token_id(text + "#chunk"), rng.uniform(4.0, 6.0)
            max_d, mean_d = rng.uniform(18.0, 33.0), rng.uniform(4.0, 17.0)
            kl, nll_b = rng.uniform(9.0, 11.0), nll_a + rng.uniform(9.0, 12.0)
        else:  # saturated: the MLP output clips; most argmaxes move
            flip = rng.random() < 0.8
            tok_b = _token_id(f"{text}#{i}") if flip else tok_a
            margin_b = rng.uniform(0.5, 4.0)
            max_d, mean_d = rng.uniform(8.0, 30.0), rng.uniform(2.0, 6.0)
            kl, nll_b = rng.uniform(2.0, 4.5), nll_a + rng.uniform(1.5, 3.5)
        agree = tok_a == tok_b
        if not agree:
            disagreements += 1
            first = i if first < 0 else first
        worst = max(worst, max_d)
        kl_sum, nll_a_sum, nll_b_sum = kl_sum + kl, nll_a_sum + nll_a, nll_b_sum + nll_b
        steps += 1
        shown = text.replace("\n", " ")
        out.cout(_ROW_FMT.format(i, tok_a, tok_b, "  ==" if agree else "DIFF", margin_a, margin_b, max_d, mean_d,
                                 shown))
        if text == STOP_TEXT:
            out.cout(f"stop token at step {i}\n")
            break
    out.cout(f"\nsummary: argmax disagreements={disagreements}, first at step {first}, worst maxAbsDiff={worst:.5f}\n")
    n = max(steps, 1)
    out.cout(f"distribution: mean KL(A||B)={kl_sum / n:.6f}, teacher-forced mean NLL A={nll_a_sum / n:.5f} "
             f"B={nll_b_sum / n:.5f} (log-ppl)\n")
    return 0 if math.isfinite(kl_sum) else 1


def _chunk_local(model: Model, answer: Any, prompt: str, n_prompt: int, out: Output) -> bool:
    """This config meets the scripted chunk-local position fault: an image prompt split into chunks."""
    limits = _chunk_limits(model, out)
    return (answer.posdbg == "chunk_local_bug" and "<img>" in prompt and bool(limits)
            and n_prompt > max(limits))  # type: ignore[arg-type]  # limits holds ints once bool(limits) is true


def _chunks_differ(a: Model, b: Model, out: Output) -> bool:
    """The step-0 artefact shows when the two configs split the prompt differently."""
    return _chunk_limits(a, out) != _chunk_limits(b, out)


__all__ = ["main"]
