"""The virtual lab's ExecuTorch `qnn_llama_runner` (and `qnn_executor_runner`).

gflags parsing as the real runner (ExecuTorch 1.5: no --kv_updater; an unknown flag prints
`ERROR: unknown command line flag 'x'` and exits 1), QNN libraries found through the
binary's rpath ($ORIGIN), LD_LIBRARY_PATH and ADSP_LIBRARY_PATH, answers from
`virtual_behaviour.json` next to the .pte (pair "qnn/cpu": LLM on QNN, no visual), printed as
ExecuTorch's real LLM runner prints (docs/executorch-runner.md#the-real-runners-output; diffed
against a real capture in tests/runners/test_executorch_real.py): per prompt the echoed prompt and
text, `PyTorchObserver {json}` (generated_tokens one less than produced, a rate absent for a 0 ms
span, model_execution_* the last call, the exact prompt count), `[file.cpp:N] message` log lines
and the 7-line `[stats.h:175]` summary; then the `--output_path` and
`--performance_output_path` files (qnn_llama_runner's own).
qnn_executor_runner writes `--etdump_path` (a placeholder file: a real ETDump needs ExecuTorch).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.hostrt.executorch import LLAMA_FLAGS, FlagError, parse_flags
from virtual_lab.runtime.devenv import device_facts, die, missing_qnn_libs

if TYPE_CHECKING:
    from virtual_lab import exports

# qnn_llama_runner's gflags: one table, the host runner's (docs/executorch-runner.md#qnn_llama_runner-flags).
EXECUTOR_FLAGS: dict[str, Any] = {
    "model_path": "model.pte", "output_folder_path": "outputs", "input_list_path": "input_list.txt",
    "etdump_path": "etdump.etdp", "debug_output_path": "debug_output.bin", "dump_intermediate_outputs": False,
    "shared_buffer": False, "method_index": 0, "iteration": 1,
}
_TOKEN_RE = re.compile(r"\s*(?:\w+|[^\w\s])")


def _log(level: str, where: str, msg: str) -> None:
    # ET_LOG as the real runner prints it: "[file.cpp:123] message", no level or time
    # (docs/executorch-runner.md#the-real-runners-output); `level` is kept for the reader.
    del level
    sys.stderr.write(f"[{where}] {msg}\n")
    sys.stderr.flush()


def _stats_report(prompt_tokens: int, generated: int, stats: Mapping[str, Any]) -> None:
    """stats.h's print_report: the 7-line summary after the PyTorchObserver line."""
    def secs(a: str, b: str) -> float:
        return (stats[b] - stats[a]) / 1000

    def rate(n: int, s: float) -> float:
        return n / s if s > 0 else 0.0

    inf, pre, dec = secs("inference_start_ms", "inference_end_ms"), secs("inference_start_ms", "prompt_eval_end_ms"), \
        secs("prompt_eval_end_ms", "inference_end_ms")
    _log("I", "stats.h:175", f"\tPrompt Tokens: {prompt_tokens}    Generated Tokens: {generated}")
    _log("I", "stats.h:181", f"\tModel Load Time:\t\t{secs('model_load_start_ms', 'model_load_end_ms'):f} (seconds)")
    _log("I", "stats.h:188", f"\tTotal inference time:\t\t{inf:f} (seconds)\t\t Rate: \t{rate(generated, inf):f} (tokens/second)")
    _log("I", "stats.h:197", f"\t\tPrompt evaluation:\t{pre:f} (seconds)\t\t Rate: \t{rate(prompt_tokens, pre):f} (tokens/second)")
    _log("I", "stats.h:207", f"\t\tGenerated {generated} tokens:\t{dec:f} (seconds)\t\t Rate: \t{rate(generated, dec):f} (tokens/second)")
    _log("I", "stats.h:219", f"\tTime to first generated token:\t{secs('inference_start_ms', 'first_token_ms'):f} (seconds)")
    sampling_s = stats["aggregate_sampling_time_ms"] / 1000
    _log("I", "stats.h:225", f"\tSampling time over {prompt_tokens + generated} tokens:\t{sampling_s:f} (seconds)")


def _check_libs(build: Mapping[str, Any], prog: str) -> bool:
    facts = device_facts()
    rpath = (os.path.dirname(os.path.realpath(prog)),) if build.get("rpath_origin") else ()
    # FastRPC also finds a Skel in the process's cwd (the ExecuTorch workspace pushes it there).
    env = dict(os.environ)
    env["ADSP_LIBRARY_PATH"] = ";".join(filter(None, [env.get("ADSP_LIBRARY_PATH", ""), os.getcwd()]))
    reason = missing_qnn_libs(facts.htp_arch or str(build.get("arch", "")), env, rpath=rpath)
    if reason:
        lib = re.search(r'"([^"]+)"', reason)
        _log("E", "QnnImplementation.cpp:82",
             f"Cannot Open QNN library {lib.group(1) if lib else 'libQnnHtp.so'}, with error: {reason}")
        return False
    return True


def _behaviour(model_path: str) -> exports.VirtualBehaviour:
    from virtual_lab import exports

    try:
        return exports.load_behaviour(os.path.join(os.path.dirname(model_path) or ".", exports.BEHAVIOUR_FILE))
    except ValueError:
        return exports.default_behaviour(False)


def llama_main(argv: list[str], build: Mapping[str, Any]) -> int:
    try:
        flags = parse_flags(argv[1:], LLAMA_FLAGS)
    except FlagError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    if flags["tokenized_prompt"] and flags["prompt"]:
        _log("E", "qnn_llama_runner.cpp:120", "Only one of prompt and tokenized_prompt should be provided")
        return 1
    prompts = flags["prompt"] or ["The answer to the ultimate question is"]
    for path, what in ((flags["model_path"], "model"), (flags["tokenizer_path"], "tokenizer")):
        if not os.path.isfile(path):
            _log("E", "runner.cpp:98", f"Failed to load {what} from {path}: file not found")
            return 1
    load_start = int(time.time() * 1000)
    if not _check_libs(build, argv[0]):
        _log("E", "QnnBackend.cpp:80", "Failed to initialize QNN backend for kHtpBackend.")
        _log("E", "text_decoder_runner.h:52", "Failed to load method 'forward'. Check available methods in the model.")
        return 1
    from virtual_lab import exports

    behaviour = _behaviour(flags["model_path"])
    load_end = load_start + 850
    _log("I", "llm_runner_helper.cpp:294", "Using method: forward")
    outputs: list[str] = []
    clock = load_end
    speed_tokens = speed_span = 0
    last_prompt_tokens = 0
    last_prefill_ms = 0
    for _ in range(max(1, flags["num_iters"])):
        for prompt in prompts:
            ans = exports.resolve_answer(behaviour, prompt, exports.PAIR_QNN_CPU)
            # The tokenizer's exact count (the real runner adds nothing).
            n_prompt = len(_TOKEN_RE.findall(flags["system_prompt"] + " " + prompt))
            budget = max(0, flags["seq_len"] - n_prompt)
            _log("I", "text_llm_runner.cpp:201", f"Max new tokens resolved: {budget}, given pos_ {n_prompt}, "
                 f"num_prompt_tokens {n_prompt}, max_context_len {flags['seq_len']}")
            tokens = _TOKEN_RE.findall(ans.text)[:budget]
            if ans.fault in ("crash", "abort", "hang"):
                sys.stdout.write("".join(tokens[: len(tokens) // 2]))
                die(ans.fault)
            if ans.fault is not None:
                _log("E", "QnnExecuTorchBackend.cpp:211", "Fail to execute graph")
                _log("E", "text_prefiller.cpp:96", "Failed to run prefill: 0x1")
                return 1
            sys.stdout.write(prompt)
            for tok in tokens:
                sys.stdout.write(tok)
                sys.stdout.flush()
            sys.stdout.write("\n")
            outputs.append(prompt + "".join(tokens))
            # Whole milliseconds, as the real stats; the first token comes out of the prefill.
            prefill_ms = int(round(n_prompt * ans.prefill_ms_per_token))
            decode_ms = int(round(max(0, len(tokens) - 1) * ans.decode_ms_per_token))
            call_ms = int(round(ans.decode_ms_per_token)) if len(tokens) > 1 else prefill_ms
            generated = max(0, len(tokens) - 1)  # the runner's count leaves out the prefill's token
            inf_start = clock
            prompt_end = inf_start + prefill_ms
            inf_end = prompt_end + decode_ms
            clock = inf_end + 1
            stats: dict[str, Any] = {}
            if prefill_ms > 0:
                stats["prefill_token_per_sec"] = round(n_prompt / (prefill_ms / 1000), 2)
            if decode_ms > 0:
                stats["decode_token_per_sec"] = round(generated / (decode_ms / 1000), 2)
            stats.update({
                "prompt_tokens": n_prompt, "generated_tokens": generated,
                "model_load_start_ms": load_start, "model_load_end_ms": load_end,
                "inference_start_ms": inf_start, "inference_end_ms": inf_end,
                # the last model call only
                "model_execution_start_ms": inf_end - call_ms, "model_execution_end_ms": inf_end,
                "prompt_eval_end_ms": prompt_end, "first_token_ms": prompt_end,
                "aggregate_sampling_time_ms": 0, "aggregate_model_execution_time_ms": inf_end - inf_start,
                "SCALING_FACTOR_UNITS_PER_SECOND": 1000,
            })
            print("PyTorchObserver " + json.dumps(stats, separators=(",", ":")), flush=True)
            _stats_report(n_prompt, generated, stats)
            speed_tokens += generated
            speed_span += inf_end - inf_start
            last_prompt_tokens, last_prefill_ms = n_prompt, prefill_ms
    with open(flags["output_path"], "w", encoding="utf-8") as fh:
        fh.write("\n".join(outputs) + "\n")
    speed = (speed_tokens / speed_span * 1000 if speed_tokens and speed_span
             else (last_prompt_tokens / last_prefill_ms * 1000 if last_prefill_ms else 0))
    with open(flags["performance_output_path"], "w", encoding="utf-8") as fh:
        fh.write(f"{speed:f}")
    return 0


def executor_main(argv: list[str], build: Mapping[str, Any]) -> int:
    try:
        flags = parse_flags(argv[1:], EXECUTOR_FLAGS)
    except FlagError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    if not os.path.isfile(flags["model_path"]):
        _log("E", "qnn_executor_runner.cpp:210", f"Failed to load program from {flags['model_path']}")
        return 1
    if not _check_libs(build, argv[0]):
        _log("E", "qnn_executor_runner.cpp:260", "Failed to load method 0: QNN backend init error 0x14")
        return 1
    os.makedirs(flags["output_folder_path"], exist_ok=True)
    for i in range(max(1, flags["iteration"])):
        with open(os.path.join(flags["output_folder_path"], f"output_{i}_0.raw"), "wb") as fh:
            fh.write(b"\x00" * 16)
    _log("I", "qnn_executor_runner.cpp:402", f"{flags['iteration']} inference took 12.3 ms, avg 12.3 ms")
    with open(flags["etdump_path"], "wb") as fh:
        # Not a flatbuffer: the virtual lab cannot make a real ETDump without ExecuTorch.
        fh.write(b"VLAB-ETDUMP-PLACEHOLDER\n")
    _log("I", "qnn_executor_runner.cpp:455", f"ETDump written to file '{flags['etdump_path']}'.")
    return 0


def main(argv: list[str], build: Mapping[str, Any] | None = None) -> int:
    build = dict(build or {})
    name = os.path.basename(argv[0]) if argv else "qnn_llama_runner"
    if "executor" in name:
        return executor_main(argv, build)
    return llama_main(argv, build)
