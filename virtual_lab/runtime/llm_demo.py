"""The virtual lab's `llm_demo`: same arguments, output, exit codes and failure modes as MNN's
(transformers/llm/engine/demo/llm_demo.cpp at 3.6.1, facts in docs/llm-demo-output.md and
docs/qnn-libraries.md).

What it answers comes from the model folder's `virtual_behaviour.json`
(format: virtual_lab.exports.behaviour, resolved per prompt and backend pair). What it checks itself:
the files the config names, the QNN libraries for the device's HTP arch through
LD_LIBRARY_PATH/ADSP_LIBRARY_PATH, the context binaries' soc/arch, and the prefill chunk
sizes against the sizes the QNN graphs were compiled for (`chunk_limits`).

Output routing follows the build: `std::cout` text (config/prompt lines, generated tokens)
always goes to stdout; MNN_PRINT/MNN_ERROR lines go to stdout, or to logcat (tag MNNJNI)
when the runtime was built with MNN_USE_LOGCAT or the device forces it.

Deliberate simplifications: one token per word (with its leading space) and per
punctuation mark; times are computed from the behaviour's ms-per-token, not slept.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.pairs import BackendPair
from virtual_lab.runtime.devenv import (
    Output,
    c_div,
    c_fmt,
    device_facts,
    die,
    missing_qnn_libs,
    read_first_prompt,
)

if TYPE_CHECKING:
    from virtual_lab import exports

INIT_FAULTS = ("init_error", "qnn_lib_missing", "binary_mismatch")
RUN_FAULTS = ("shape_error", "poison_next")
INTERNAL_ERROR = 4
_TOKEN_RE = re.compile(r"\s*(?:\w+|[^\w\s])")
_IMG_RE = re.compile(r"<img>(.*?)</img>", re.S)
_HW_RE = re.compile(r"<hw>\s*(\d+)\s*,\s*(\d+)\s*</hw>")


@dataclass
class Model:
    config_path: str
    base_dir: str
    config: dict[str, Any]
    llm_config: dict[str, Any]
    behaviour: exports.VirtualBehaviour
    pair: str
    manifest: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.config:
            return self.config[key]
        return self.llm_config.get(key, default)

    @property
    def backend_pair(self) -> BackendPair:
        """The config's pair, decided by harness.pairs from the config's content."""
        return BackendPair.of_config(self.config, visual=bool(self.get("is_visual")))

    @property
    def llm_on_qnn(self) -> bool:
        return self.backend_pair.uses_qnn_llm

    @property
    def visual_on_qnn(self) -> bool:
        return self.backend_pair.uses_qnn_visual

    def path(self, name: str) -> str:
        return os.path.join(self.base_dir, name)


def _read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _load_config(arg: str, out: Output) -> Model:
    if arg.endswith(".json"):
        base_dir = os.path.dirname(arg) or "."
        config = _read_json(arg)
        if config is None:
            out.cerr(f"Unable to open config file: {arg}\n")
            if not os.path.exists(arg):
                out.cerr("Error: No such file or directory (errno: 2)\n")
            config = {}
    elif arg.endswith(".mnn"):
        base_dir = os.path.dirname(arg) or "."
        name = os.path.basename(arg)
        config = {"llm_model": name, "llm_weight": name + ".weight"}
    else:
        base_dir, config = arg, {}
    base_dir = str(config.get("base_dir", base_dir))
    llm_config_path = os.path.join(base_dir, str(config.get("llm_config", "llm_config.json")))
    llm_config = _read_json(llm_config_path)
    if llm_config is None:
        out.cerr(f"Unable to open llm_config file: {llm_config_path}\n")
        llm_config = {}
    from virtual_lab import exports

    pair = exports.backend_pair_of(config)
    try:
        behaviour = exports.load_behaviour(os.path.join(base_dir, exports.BEHAVIOUR_FILE))
    except ValueError:
        behaviour = exports.default_behaviour(bool(llm_config.get("is_visual")))
    manifest = _read_json(os.path.join(base_dir, exports.MANIFEST_PATH)) or {}
    return Model(arg, base_dir, config, llm_config, behaviour, pair, manifest)


# ---- load() ---------------------------------------------------------------------------------
def _check_files(model: Model, out: Output) -> bool:
    for key, default, label in (("tokenizer_file", "tokenizer.txt", "tokenizer"),
                                ("llm_model", "llm.mnn", "LLM model"),
                                ("llm_weight", "llm.mnn.weight", "LLM weight")):
        p = model.path(str(model.config.get(key, default)))
        if not os.path.isfile(p):
            out.mnn_error(f"[Error]: {label} file not found: {p}\n")
            return False
        if not os.access(p, os.R_OK):
            out.mnn_error(f"[Error]: Failed to open {label} file (permission denied?): {p}\n")
            return False
    if model.get("is_visual"):
        p = model.path(str(model.config.get("visual_model", "visual.mnn")))
        if not os.path.isfile(p):
            out.mnn_error(f"[Omni:embedding] Module::load failed for {p}\n")
            return False
    return True


def _context_binaries(model: Model) -> list[str]:
    npu_dir = model.path(str(model.config.get("npu_model_dir", "")) or ".")
    graphs = model.manifest.get("graphs", {}) if isinstance(model.manifest.get("graphs"), dict) else {}
    names: list[str] = []
    if model.llm_on_qnn:
        names += graphs.get("llm") or _listed(npu_dir, "graphllm")
    if model.visual_on_qnn:
        names += graphs.get("visual") or _listed(npu_dir, "graphvisual")
    return [os.path.normpath(os.path.join(npu_dir, n)) for n in names]


def _listed(npu_dir: str, prefix: str) -> list[str]:
    qdir = os.path.join(npu_dir, "qnn")
    try:
        return sorted(f"qnn/{n}" for n in os.listdir(qdir) if n.startswith(prefix) and n.endswith(".bin"))
    except OSError:
        return []


def _check_qnn(model: Model, facts, out: Output, env: Mapping[str, str], rpath: tuple[str, ...]) -> bool:
    if not (model.llm_on_qnn or model.visual_on_qnn):
        return True
    from virtual_lab import exports

    reason = missing_qnn_libs(facts.htp_arch, env, rpath=rpath)
    if reason is not None:
        out.mnn_error("MNN_QNN: Failed to open QNN libs. Ensure that the libs related to the QNN HTP backend "
                      f"is available in your environment. dlerror() returns {reason}.\n")
        return False
    for path in _context_binaries(model):
        if not os.path.isfile(path):
            out.mnn_error(f"[Error]: Load module failed, please check model. ({path} is missing)\n")
            return False
        try:
            soc_id, arch = exports.binary_target(path)
        except ValueError:
            out.mnn_error("QNN: Failed to validate binary: 1009\n")  # not a context binary at all
            return False
        arch_ok = str(arch or "") == facts.htp_arch
        soc_ok = facts.soc_id is None or soc_id in (None, facts.soc_id)
        if not (arch_ok and soc_ok):
            out.mnn_error("QNN: Failed to validate binary: 5004\n")
            return False
    if model.llm_on_qnn:
        out.mnn_print(f"mSeqLen[i]={_compiled_chunk(model)} in init, 180\n")
    return True


def _compiled_chunk(model: Model) -> int:
    if isinstance(model.manifest.get("chunk_size"), int):
        return model.manifest["chunk_size"]
    return 128


def _chunk_limits(model: Model, out: Output) -> list[int] | None:
    if "chunk_limits" not in model.config:
        chunk = model.config.get("chunk")
        return [int(chunk), 1] if isinstance(chunk, int) and chunk > 0 else None
    cl = model.config["chunk_limits"]
    if not isinstance(cl, list):
        out.mnn_error("size_limit must be array, eg: [128, 1]\n")
        return None
    if len(cl) < 2:
        out.mnn_error("size_limit must be array larger than 1, eg: [128, 1]\n")
        return None
    return [int(x) for x in cl]


# ---- generation -------------------------------------------------------------------------
def prompt_tokens(prompt: str, llm_config: Mapping[str, Any]) -> int:
    """The virtual lab's token count (virtual_lab.exports.segments.virtual_prompt_segments)."""
    try:
        from virtual_lab.exports import virtual_prompt_segments

        return sum(getattr(s, "n", None) or s.n_tokens for s in virtual_prompt_segments(prompt, llm_config))
    except ImportError:  # harness.checks.mrope not visible in this sandbox: same rule, inline
        n, pos = 8, 0
        for m in _IMG_RE.finditer(prompt):
            n += len(_TOKEN_RE.findall(prompt[pos:m.start()]))
            hw = _HW_RE.search(m.group(1))
            size = int(llm_config.get("image_size", 420))
            h, w = (int(hw.group(1)), int(hw.group(2))) if hw else (size, size)
            if llm_config.get("is_visual"):
                n += max(1, round(h / 32)) * max(1, round(w / 32)) + 2
            pos = m.end()
        return n + len(_TOKEN_RE.findall(prompt[pos:]))


def _prefill_sizes(n: int, limits: list[int] | None) -> list[int]:
    """Padded size of each prefill forward, as MNN's forwardVec splits (one call unchunked)."""
    if not limits:
        return [n]
    from virtual_lab.mrope_sim import prefill_chunks  # the one implementation of the split

    return [padded for _start, _real, padded in prefill_chunks(n, limits)]


@dataclass
class Stats:
    prompt_len: int = 0
    decode_len: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    sample_s: float = 0.0
    vision_s: float = 0.0
    pixels_mp: float = 0.0


class Engine:
    def __init__(self, model: Model, out: Output, facts, limits: list[int] | None):
        self.model, self.out, self.facts, self.limits = model, out, facts, limits
        self.status = 0
        self.stale_prompt_len = 0
        self.vision_us = 0.0
        self.pixels_mp = 0.0
        self.max_new_tokens = int(model.get("max_new_tokens", 512))
        threads = int(model.get("thread_num", 4) or 4)
        self.cpu_scale = 4.0 / max(1, threads)

    def error_state(self) -> None:
        self.out.mnn_print(f"[Error]: LLM in error state. Status: {INTERNAL_ERROR}\n")

    def _shape_error(self) -> None:
        if self.model.llm_on_qnn:
            self.out.mnn_error("MNN_QNN: Failed to compute shape for Plugin Op.\n")
        else:
            self.out.mnn_error("Broad cast error, dim1 = 3, dim2 = 4\n")
            self.out.mnn_error("Compute Shape Error for /layers.0/mlp/Add_output_0\n")
            self.out.mnn_error("code=3 in onForward, 531\n")
            self.out.mnn_error("[Error]: onForward returned no outputs. seqLen=128, inDecode=0, inputs=5, "
                               "moduleKey=(0,0)\n")
        self.status = INTERNAL_ERROR

    def respond(self, prompt: str, limit: int, stats: Stats) -> None:
        """One prompt: prefill, then decode up to `limit` tokens (the first included)."""
        from virtual_lab import exports

        if self.status != 0:
            self.error_state()  # CHECK_LLM_RUNNING: a poisoned process answers nothing
            stats.prompt_len += self.stale_prompt_len  # the summary keeps adding the stale prompt_len
            return
        answer = exports.resolve_answer(self.model.behaviour, prompt, self.model.pair)
        n_prompt = prompt_tokens(prompt, self.model.llm_config)
        self.stale_prompt_len = n_prompt
        for m in _IMG_RE.finditer(prompt):
            hw = _HW_RE.search(m.group(1))
            path = _HW_RE.sub("", m.group(1))
            if not os.path.isfile(path) and not path.startswith(("http://", "https://")):
                self.out.mnn_print("Omni Can't open image\n")
                continue
            size = int(self.model.llm_config.get("image_size", 420))
            h, w = (int(hw.group(1)), int(hw.group(2))) if hw else (size, size)
            mp = h * w / 1e6
            self.pixels_mp += mp
            self.vision_us += mp * (40_000 if self.model.visual_on_qnn else 400_000)
        if answer.posdbg:
            self._posdbg(prompt, answer.posdbg)
        if answer.fault in RUN_FAULTS or (self.model.llm_on_qnn and not self._chunks_fit(n_prompt)):
            self._shape_error()
            return
        scale = 1.0 if self.model.llm_on_qnn else self.cpu_scale
        padded = sum(_prefill_sizes(n_prompt, self.limits))
        stats.prompt_len += n_prompt
        stats.prefill_s += padded * answer.prefill_ms_per_token * scale / 1000
        tokens = _TOKEN_RE.findall(answer.text)
        fault = answer.fault or ""
        dies = fault in ("crash", "abort", "hang")
        printed = 0
        for i, tok in enumerate(tokens):
            if printed >= limit:
                break
            if dies and i == len(tokens) // 2:
                die(fault)  # mid-generation, after some tokens were flushed
            self.out.cout(tok)
            printed += 1
        if dies:
            die(fault)
        eos = printed == len(tokens) and printed < limit
        if eos:
            self.out.cout("\n")  # end_with
            printed += 1  # gen_seq_len counts the stop token
        stats.decode_len += printed
        forwards = max(0, printed - 1) if eos else printed
        stats.decode_s += forwards * answer.decode_ms_per_token * scale / 1000
        stats.sample_s += printed * 0.0002

    def _chunks_fit(self, n_prompt: int) -> bool:
        """QNN graphs exist only for the compiled chunk size and 1 (decode)."""
        compiled = {_compiled_chunk(self.model), 1}
        return all(size in compiled for size in _prefill_sizes(n_prompt, self.limits))

    def _posdbg(self, prompt: str, mode: str) -> None:
        try:
            from virtual_lab.exports import posdbg_lines

            lines = posdbg_lines(prompt, self.model.llm_config, mode=mode, chunk_limits=self.limits or (128, 1))
        except ImportError as exc:
            self.out.cerr(f"virtual llm_demo: [POSDBG] needs harness.checks.mrope, not visible here ({exc})\n")
            return
        for line in lines:
            self.out.mnn_print(line + "\n")


def _summary(out: Output, stats: Stats, engine: Engine) -> None:
    vision_s = engine.vision_us / 1e6
    vision_speed = engine.pixels_mp / vision_s if engine.pixels_mp > 0 else 0.0
    out.mnn_print("\n#################################\n")
    out.mnn_print(f"prompt tokens num = {stats.prompt_len}\n")
    out.mnn_print(f"decode tokens num = {stats.decode_len}\n")
    out.mnn_print(f" vision time = {c_fmt(vision_s, 2)} s\n")
    out.mnn_print(f" pixels_mp = {c_fmt(engine.pixels_mp, 2)} MP\n")
    out.mnn_print("  audio process time = 0.00 s\n")
    out.mnn_print("  audio input time = 0.00 s\n")
    out.mnn_print(f"prefill time = {c_fmt(stats.prefill_s, 2)} s\n")
    out.mnn_print(f" decode time = {c_fmt(stats.decode_s, 2)} s\n")
    out.mnn_print(f" sample time = {c_fmt(stats.sample_s, 2)} s\n")
    # llm_demo divides by the times as printed to float precision; %.2f of tiny times is 0.00.
    out.mnn_print(f"prefill speed = {c_fmt(c_div(stats.prompt_len, stats.prefill_s), 2)} tok/s\n")
    out.mnn_print(f" decode speed = {c_fmt(c_div(stats.decode_len, stats.decode_s), 2)} tok/s\n")
    out.mnn_print(f" vision speed = {c_fmt(vision_speed, 3)} MP/s\n")
    out.mnn_print(f" audio RTF = {c_fmt(c_div(0.0, 0.0), 3)} \n")
    out.mnn_print("##################################\n")


def _parse_int(text: str) -> int:
    """`istringstream >> int`: leading integer, 0 when there is none."""
    m = re.match(r"\s*([-+]?\d+)", text)
    return int(m.group(1)) if m else 0


def _real_cpu_export(config_arg: str) -> bool:
    """A real MNN export (no virtual_behaviour.json) on a CPU LLM config: run it for real on
    the PyPI `mnn` engine through the harness's host runtime, when that engine is installed."""
    if not config_arg.endswith(".json") or not os.path.isfile(config_arg):
        return False
    from virtual_lab import exports

    base_dir = os.path.dirname(config_arg) or "."
    config = _read_json(config_arg) or {}
    if os.path.exists(os.path.join(base_dir, exports.BEHAVIOUR_FILE)):
        return False
    if BackendPair.of_config(config, visual=False).uses_qnn_llm:
        return False  # a QNN LLM needs the NPU: the virtual runtime plays it
    if not os.path.isfile(os.path.join(base_dir, str(config.get("llm_model", "llm.mnn")))):
        return False
    import importlib.util

    return importlib.util.find_spec("MNN") is not None


def main(argv: list[str], build: Mapping[str, Any] | None = None) -> int:
    build = dict(build or {})
    if len(argv) >= 2 and _real_cpu_export(argv[1]):
        from harness.hostrt.llm_demo import main as host_main

        return host_main(argv[1:])
    facts = device_facts()
    out = Output(logcat=bool(build.get("logcat_only")) or facts.logcat_only)
    prog = argv[0] if argv else "llm_demo"
    if len(argv) < 2:
        out.cout(f"Usage: {prog} config.json <prompt.txt>\n")
        return 0
    config_arg = argv[1]
    out.cout(f"config path is {config_arg}\n")
    model = _load_config(config_arg, out)
    try:  # set_config({"tmp_path": "tmp"}): relative to the cwd, which must be writable
        os.makedirs("tmp", exist_ok=True)
    except OSError:
        out.mnn_print("Llm: cannot create cache dir 'tmp' (no write permission?). Continuing without disk cache\n")
    limits = _chunk_limits(model, out)
    out.mnn_print("The device supports: i8sdot:1, fp16:1, i8mm: 1, sve2: 0, sme2: 0\n")

    first = read_first_prompt(argv[2]) if len(argv) >= 3 else ""
    from virtual_lab import exports

    init = exports.resolve_answer(model.behaviour, first, model.pair).fault
    rpath = (os.path.dirname(os.path.realpath(prog)),) if build.get("rpath_origin") else ()
    ok = _check_files(model, out) and _check_qnn(model, facts, out, os.environ, rpath)
    if ok and init == "init_error":
        out.mnn_error(f"[Error]: LLM model file not found: {model.path('llm.mnn')}\n")
        ok = False
    elif ok and init == "qnn_lib_missing":
        out.mnn_error("MNN_QNN: Failed to open QNN libs. Ensure that the libs related to the QNN HTP backend is "
                      'available in your environment. dlerror() returns dlopen failed: library "libQnnHtp.so" '
                      "not found.\n")
        ok = False
    elif ok and init == "binary_mismatch":
        out.mnn_error("QNN: Failed to validate binary: 5004\n")
        ok = False
    if not ok:
        out.mnn_error("LLM init error\n")
        out.mnn_print("main, 276, cost time: 3.120000 ms\n")  # AUTOTIME's destructor still prints
        return 0
    out.mnn_print("main, 276, cost time: 412.338000 ms\n")
    out.mnn_print("Prepare for tuning opt Begin\n")
    out.mnn_print("Prepare for tuning opt End\n")
    out.mnn_print("main, 284, cost time: 18.052000 ms\n")
    engine = Engine(model, out, facts, limits)
    if len(argv) < 3:
        return _chat(engine)
    max_token_number = _parse_int(argv[3]) if len(argv) >= 4 else -1
    if len(argv) >= 5:
        out.mnn_print("Set not thinking, only valid for Qwen3\n")
    return _eval(engine, argv[2], max_token_number)


def _eval(engine: Engine, prompt_file: str, max_token_number: int) -> int:
    out = engine.out
    out.cout(f"prompt file is {prompt_file}\n")
    prompts: list[str] = []
    try:
        with open(prompt_file, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                line = line.rstrip("\n")
                if not line:
                    continue
                prompts.append(line[:-1] if line.endswith("\r") else line)
    except OSError:
        return 1
    if not prompts:
        return 1
    stats = Stats()
    for prompt in prompts:
        if prompt.startswith("#"):
            continue
        if max_token_number >= 0:
            # response(prompt, &cout, nullptr, 0), then generate(1) while !stoped().
            was_poisoned = engine.status != 0
            engine.respond(prompt, max_token_number, stats)
            if engine.status != 0 and not was_poisoned:
                engine.error_state()  # stoped() -> is_stop() -> CHECK_LLM_RUNNING_RET
        else:
            engine.respond(prompt, engine.max_new_tokens, stats)
            if engine.status == INTERNAL_ERROR:
                out.mnn_error("Error: Response generation failed due to internal error\n")
                return 255  # main returns -1
    _summary(out, stats, engine)
    return 0


def _chat(engine: Engine) -> int:
    stats = Stats()
    while True:
        engine.out.cout("\nUser: ")
        line = sys.stdin.readline()
        if not line or line.strip() == "/exit":
            return 0
        if line.strip() == "/reset":
            engine.out.cout("\nA: reset done.\n")
            continue
        engine.out.cout("\nA: ")
        engine.respond(line.strip(), engine.max_new_tokens, stats)


__all__ = ["main", "prompt_tokens"]
