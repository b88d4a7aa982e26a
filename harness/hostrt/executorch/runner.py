"""`qnn_llama_runner` on the host, on ExecuTorch's real C++ LLM runner (the PyPI `executorch`
wheel's `TextLLMRunner` binding; docs/executorch-runner.md#the-real-runner-on-the-host).

    python -m harness.hostrt.executorch --model_path M.pte --tokenizer_path tokenizer.json \
        --prompt "..." [--prompt "..."] [--seq_len N] [--temperature T] [qnn_llama_runner's other flags]

Takes qnn_llama_runner's gflags (an unknown flag: `ERROR: unknown command line flag 'x'`, exit 1)
and prints what the runner prints: the binding itself writes the echoed prompt, the text and the
`PyTorchObserver {json}` line to stdout and its `[file.cpp:N] message` log to stderr. What the
binding does not do is not faked: no `--output_path` / `--performance_output_path` files, no
chat template (`--system_prompt` text goes before the prompt), one decode mode (`--eval_mode`,
`--shared_buffer` and the lookahead flags are accepted and have no effect on the CPU).

The LLM custom ops (`llama::custom_sdpa.out`, `llama::update_cache.out`) are registered before the
load, as ExecuTorch's own Python runner does; `HARNESS_ET_CUSTOM_OPS=0` leaves them out, which
reproduces the real load failure (`Missing operator: ...`, `Failed to load method 'forward'`).
Exit codes: 0 done, 1 a flag error or the runner's `RuntimeError` (printed as Python prints it),
2 the `executorch` extra is not installed.

`executorch` (with torch's CPU build) is an optional extra (`pip install 'harness[executorch]'`),
imported only here.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.hostfiles import checkout_root

PROG = "python -m harness.hostrt.executorch"
RUNNER_NAME = "qnn_llama_runner"
EXIT_NO_ENGINE = 2
CUSTOM_OPS_ENV = "HARNESS_ET_CUSTOM_OPS"

# qnn_llama_runner's gflags and defaults (docs/executorch-runner.md#qnn_llama_runner-flags).
LLAMA_FLAGS: dict[str, Any] = {
    "decoder_model_version": "llama2", "model_path": "kv_llama_qnn.pte", "attention_sink_rope_path": "",
    "output_path": "outputs.txt", "performance_output_path": "inference_speed.txt", "dump_logits_path": "",
    "tokenizer_path": "tokenizer.bin", "prompt": [], "tokenized_prompt": "", "system_prompt": "",
    "temperature": 0.0, "seq_len": 128, "eval_mode": 1, "shared_buffer": False, "num_iters": 1,
    "ngram": 0, "window": 0, "gcap": 0,
}
DEFAULT_PROMPT = "The answer to the ultimate question is"


class FlagError(Exception):
    """A command line gflags would refuse (the message is gflags' own wording)."""


def parse_flags(argv: Sequence[str], spec: Mapping[str, Any] = LLAMA_FLAGS) -> dict[str, object]:
    """gflags parsing: `--name value`, `--name=value`, `-name`; bools take no value (or `=false`);
    `--prompt` repeats. Positional words are ignored, as gflags leaves them to main."""
    flags = {k: (list(v) if isinstance(v, list) else v) for k, v in spec.items()}
    i = 0
    while i < len(argv):
        a = argv[i]
        if not a.startswith("-") or a in ("-", "--"):
            i += 1
            continue
        name, eq, value = a.lstrip("-").partition("=")
        if name not in spec:
            raise FlagError(f"ERROR: unknown command line flag '{name}'")
        default = spec[name]
        if isinstance(default, bool):
            flags[name] = value.lower() not in ("false", "0", "no", "f", "n") if eq else True
            i += 1
            continue
        if not eq:
            i += 1
            if i >= len(argv):
                raise FlagError(f"ERROR: flag '{name}' is missing its argument")
            value = argv[i]
        try:
            if isinstance(default, list):
                flags[name].append(value)
            elif isinstance(default, int):
                flags[name] = int(value)
            elif isinstance(default, float):
                flags[name] = float(value)
            else:
                flags[name] = value
        except ValueError:
            raise FlagError(f"ERROR: illegal value '{value}' specified for flag '{name}'") from None
        i += 1
    return flags


def _register_custom_ops() -> None:
    """Import ExecuTorch's custom-op library. Its import (torch, torchao) prints Python-side
    noise to fd 2 that the C++ runner never prints; it is kept back unless the import fails."""
    with tempfile.TemporaryFile() as noise:
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(noise.fileno(), 2)
        failed: BaseException | None = None
        try:
            import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401
        except BaseException as exc:  # re-raised below, after fd 2 is back
            failed = exc
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        if failed is not None:
            noise.seek(0)
            sys.stderr.write(noise.read().decode("utf-8", "replace"))
            raise failed


def run(flags: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> int:
    if flags["tokenized_prompt"] and flags["prompt"]:
        sys.stderr.write("Only one of prompt and tokenized_prompt should be provided\n")
        return 1
    if flags["tokenized_prompt"]:
        sys.stderr.write("--tokenized_prompt is not supported on the host: the binding takes text prompts\n")
        return 1
    try:
        if environ.get(CUSTOM_OPS_ENV, "1") != "0":
            _register_custom_ops()
        from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner
    except ImportError as exc:
        sys.stderr.write(f"[Error]: ExecuTorch's LLM runner is not installed ({exc}); "
                         "pip install 'harness[executorch]'\n")
        return EXIT_NO_ENGINE
    prompts = flags["prompt"] or [DEFAULT_PROMPT]
    system = flags["system_prompt"]
    try:
        runner = TextLLMRunner(flags["model_path"], flags["tokenizer_path"])
        for _ in range(max(1, flags["num_iters"])):
            for prompt in prompts:
                text = f"{system}{prompt}" if system else prompt
                config = GenerationConfig(echo=True, seq_len=flags["seq_len"], temperature=flags["temperature"])
                # The binding prints the text itself; a Python callback would only double it.
                runner.generate(text, config, lambda _piece: None, lambda _stats: None)
                runner.reset()
    except RuntimeError as exc:
        sys.stdout.flush()
        sys.stderr.write(f"RuntimeError: {exc}\n")
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        flags = parse_flags(args)
    except FlagError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    return run(flags)


def make_runtime_dir(dst: Path, python: str | None = None) -> Path:
    """A runtime folder holding `qnn_llama_runner` (this module) and `pte_runner` (a program's
    forward through the pybindings, harness.hostrt.executorch.forward): scripts that start
    them with this Python and this checkout on PYTHONPATH (provisioning takes a script runner
    as it is)."""
    dst.mkdir(parents=True, exist_ok=True)
    _module_script(dst, RUNNER_NAME, "harness.hostrt.executorch",
                   "qnn_llama_runner's flags on ExecuTorch's real LLM runner", python)
    _module_script(dst, "pte_runner", "harness.hostrt.executorch.forward",
                   "a .pte's forward on ExecuTorch's pybindings", python)
    return dst


def _module_script(dst: Path, name: str, module: str, what: str, python: str | None) -> None:
    root = checkout_root()
    script = dst / name
    tmp = dst / f".{name}.tmp"
    tmp.write_text(f"#!/bin/sh\n# {what} ({module})\n"
                   f"PYTHONPATH={shlex.quote(str(root))}${{PYTHONPATH:+:$PYTHONPATH}} "
                   f"exec {shlex.quote(python or sys.executable)} -m {module} \"$@\"\n",
                   encoding="utf-8")
    tmp.chmod(0o755)
    tmp.replace(script)


if __name__ == "__main__":
    sys.exit(main())
