"""Host llm_demo on the PyPI mnn engine: the contract pieces in isolation, then a few runs of
the real SmolLM2 export (marked real_engine; each load + generation costs about a second)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.hostrt import llm_demo as hd

pytestmark = pytest.mark.slow  # tens of seconds: tests/conftest.py starts slow files early

REPO = Path(__file__).resolve().parents[2]
SHARED_MODEL = REPO / ".." / "shared" / "models" / "smollm2-135m-instruct-mnn-npu16"
FRANCE = "What is the capital of France? Answer briefly."

SUMMARY_RE = re.compile(
    r"\n#{33}\n"
    r"prompt tokens num = (?P<prompt>-?\d+)\n"
    r"decode tokens num = (?P<decode>-?\d+)\n"
    r" vision time = \d+\.\d\d s\n"
    r" pixels_mp = \d+\.\d\d MP\n"
    r"  audio process time = \d+\.\d\d s\n"
    r"  audio input time = \d+\.\d\d s\n"
    r"prefill time = (?P<prefill_s>\d+\.\d\d) s\n"
    r" decode time = (?P<decode_s>\d+\.\d\d) s\n"
    r" sample time = \d+\.\d\d s\n"
    r"prefill speed = (?P<prefill_speed>\d+\.\d\d|inf|-?nan) tok/s\n"
    r" decode speed = (?P<decode_speed>\d+\.\d\d|inf|-?nan) tok/s\n"
    r" vision speed = \d+\.\d\d\d MP/s\n"
    r" audio RTF = (?:\d+\.\d\d\d|inf|-?nan) \n"
    r"#{34}\n\Z")


# ----------------------------------------------------------------------------- contract pieces

def test_summary_block_matches_llm_demo_byte_for_byte() -> None:
    # mnn-llm.md §1, the VERIFIED-RUN block: 147058.83 (not .82) needs llm_demo's float arithmetic
    expected = ("\n#################################\n"
                "prompt tokens num = 6\n"
                "decode tokens num = 5\n"
                " vision time = 0.00 s\n"
                " pixels_mp = 0.00 MP\n"
                "  audio process time = 0.00 s\n"
                "  audio input time = 0.00 s\n"
                "prefill time = 0.00 s\n"
                " decode time = 0.00 s\n"
                " sample time = 0.00 s\n"
                "prefill speed = 130434.78 tok/s\n"
                " decode speed = 147058.83 tok/s\n"
                " vision speed = 0.000 MP/s\n"
                " audio RTF = -nan \n"
                "##################################\n")
    assert hd.format_summary(hd.Totals(prompt_len=6, decode_len=5, prefill_us=46, decode_us=34)) == expected


def test_summary_zero_times_print_inf_and_nan() -> None:
    text = hd.format_summary(hd.Totals(prompt_len=12, decode_len=0, prefill_us=0, decode_us=0))
    m = SUMMARY_RE.search(text)
    assert m and m["prefill_speed"] == "inf" and m["decode_speed"] == "-nan"
    assert hd.c_format(float("-inf"), 2) == "-inf" and hd.c_format(1.005, 2) == f"{1.005:.2f}"


def test_summary_vision_speed_only_with_pixels() -> None:
    t = hd.Totals(prompt_len=3, decode_len=1, prefill_us=10, decode_us=10, vision_us=500000, pixels_mp=1.0,
                  audio_us=250000, audio_input_s=1.0)
    text = hd.format_summary(t)
    assert " vision time = 0.50 s\n" in text and " vision speed = 2.000 MP/s\n" in text
    assert " audio RTF = 0.250 \n" in text


@pytest.mark.parametrize("arg,value", [("5", 5), ("-1", -1), ("  +7", 7), ("12abc", 12), ("abc", 0), ("", 0),
                                       ("99999999999", 2 ** 31 - 1), ("-99999999999", -(2 ** 31))])
def test_max_tokens_parsed_like_istringstream(arg: str, value: int) -> None:
    assert hd.parse_max_tokens(arg) == value


def test_prompt_lines_like_getline(tmp_path: Path) -> None:
    f = tmp_path / "p.txt"
    f.write_bytes(b"first\r\n\n# skipped later\n\r\nlast without newline")
    # "\r" alone is not empty for getline, so llm_demo runs an empty prompt for it
    assert hd.read_prompt_lines(f) == ["first", "# skipped later", "", "last without newline"]
    assert hd.read_prompt_lines(tmp_path / "missing.txt") == []
    (tmp_path / "empty.txt").write_text("\n\n")
    assert hd.read_prompt_lines(tmp_path / "empty.txt") == []


def test_ceval_csv_quotes() -> None:
    rows = hd.parse_ceval_csv(["id,question,A,B,C,D,answer", '1,"Say ""hi"", then, stop",a,b,c,d,A'])
    assert rows[1] == ["1", 'Say "hi", then, stop', "a", "b", "c", "d", "A"]


def test_usage_returns_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert hd.main([]) == 0
    assert capsys.readouterr().out == f"Usage: {hd.PROG} config.json <prompt.txt>\n"


def test_without_mnn_a_clear_error(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['MNN'] = None; from harness.hostrt.llm_demo import main; "
            "sys.exit(main(['x/config.json', 'p.txt']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert proc.returncode == hd.EXIT_NO_ENGINE
    assert proc.stdout == "config path is x/config.json\n"
    assert "mnn" in proc.stderr and "pip install" in proc.stderr and "Traceback" not in proc.stderr


def test_null_override_rejected() -> None:
    pytest.importorskip("MNN.llm", reason="the mnn package is not installed")
    with pytest.raises(HarnessError, match="chunk_limits"):
        hd.HostEngine("x/config.json", {"chunk_limits": None})


# ----------------------------------------------------------------------------- real engine

def _need_real() -> None:
    if not (SHARED_MODEL / "llm.mnn.weight").is_file():
        pytest.skip(f"{SHARED_MODEL} absent (needs the sibling ../shared of the repo)")
    pytest.importorskip("MNN.llm", reason="the mnn package (MNN.llm engine) is not installed")


def _export_copy(dst: Path, drop: tuple[str, ...] = (), **config: object) -> Path:
    """The shared export in `dst` (big read-only files linked, never edited) with a derived config."""
    dst.mkdir(parents=True, exist_ok=True)
    for src in SHARED_MODEL.iterdir():
        if src.name in drop or src.name == "config.json":
            continue
        if src.stat().st_size > 1 << 20:
            (dst / src.name).symlink_to(src.resolve())
        else:
            shutil.copyfile(src, dst / src.name)
    cfg = json.loads((SHARED_MODEL / "config.json").read_text())
    cfg.update({"sampler_type": "greedy", "max_new_tokens": 48, **config})
    (dst / "config.json").write_text(json.dumps(cfg, indent=1))
    return dst / "config.json"


def _demo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.hostrt.llm_demo", *args], capture_output=True,
                          text=True, cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)


@pytest.fixture(scope="module")
def greedy_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need_real()
    return _export_copy(tmp_path_factory.mktemp("smollm2") / "model")


@pytest.mark.real_engine
def test_france_prompt_real_engine(greedy_config: Path, tmp_path: Path) -> None:
    (tmp_path / "prompt.txt").write_text(FRANCE + "\n")
    proc = _demo(tmp_path, str(greedy_config), "prompt.txt")
    print(proc.stdout)
    assert proc.returncode == 0 and proc.stderr == ""
    lines = proc.stdout.split("\n")
    assert lines[0] == f"config path is {greedy_config}"
    assert "prompt file is prompt.txt" in lines
    body = proc.stdout.split("prompt file is prompt.txt\n", 1)[1]
    assert body.startswith("The capital of France is Paris.\n")   # EOS -> end_with newline
    assert "[MNNLLM]" not in proc.stdout
    m = SUMMARY_RE.search(proc.stdout)
    assert m, proc.stdout
    assert (int(m["prompt"]), int(m["decode"])) == (40, 8)   # 7 tokens + EOS, as llm_demo counts
    assert float(m["prefill_speed"]) > 0 and float(m["decode_speed"]) > 0


@pytest.mark.real_engine
def test_max_tokens_cuts_without_newline_and_sums(greedy_config: Path, tmp_path: Path) -> None:
    (tmp_path / "p.txt").write_text(f"{FRANCE}\n# not a prompt\n\n{FRANCE}\n")
    proc = _demo(tmp_path, str(greedy_config), "p.txt", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    body = proc.stdout.split("prompt file is p.txt\n", 1)[1]
    assert body.startswith("The capital ofThe capital of\n#####")   # no separator at max tokens
    m = SUMMARY_RE.search(proc.stdout)
    assert m and (int(m["prompt"]), int(m["decode"])) == (80, 6)


@pytest.mark.real_engine
def test_missing_weight_and_missing_prompt_file(greedy_config: Path, tmp_path: Path) -> None:
    cfg = _export_copy(tmp_path / "noweight", drop=("llm.mnn.weight",))
    proc = _demo(tmp_path, str(cfg), "p.txt")
    assert proc.returncode == 0
    assert f"[Error]: LLM weight file not found: {cfg.parent}/llm.mnn.weight\nLLM init error\n" in proc.stdout
    proc = _demo(tmp_path, str(greedy_config), "nofile.txt")
    assert proc.returncode == 1
    assert proc.stdout.endswith("prompt file is nofile.txt\n") and "####" not in proc.stdout


@pytest.mark.real_engine
def test_internal_error_poisons_later_prompts(tmp_path: Path) -> None:
    _need_real()
    cfg = _export_copy(tmp_path / "broken")
    llm_config = json.loads((cfg.parent / "llm_config.json").read_text())
    llm_config["hidden_size"] = 512   # embeddings read with the wrong width: shape error in prefill
    (cfg.parent / "llm_config.json").write_text(json.dumps(llm_config))
    (tmp_path / "p.txt").write_text("Hello there\nWhat is 2+2?\n")
    proc = _demo(tmp_path, str(cfg), "p.txt", "5")
    assert proc.returncode == 0   # llm_demo's rc 0 on a prefill failure with max tokens given
    assert "Compute Shape Error for" in proc.stdout
    assert proc.stdout.count("[Error]: LLM in error state. Status: 4\n") == 3   # 1 + 2 for the poisoned one
    m = SUMMARY_RE.search(proc.stdout)
    assert m and int(m["decode"]) == 0 and int(m["prompt"]) == 2 * 32  # the stale prompt_len is added again
    proc = _demo(tmp_path, str(cfg), "p.txt")
    assert proc.returncode == 255
    assert proc.stdout.endswith("Error: Response generation failed due to internal error\n")


@pytest.mark.real_engine
def test_chunked_prefill_vs_one_chunk(greedy_config: Path, record_property) -> None:
    prompt = ("Read the following notes and answer the question at the end. "
              + " ".join(f"Note {i}: the warehouse in district {i} stores {i * 7} boxes of apples and "
                         f"{i * 3} boxes of pears." for i in range(1, 12))
              + " Question: how many boxes of apples are stored in district 5? Answer briefly.")
    runs = {name: hd.run_prompts_detailed(greedy_config, [prompt], 40, overrides)[0]
            for name, overrides in (("chunk_128", {"chunk_limits": [128, 1]}),
                                    ("unchunked", {}),
                                    ("chunk_1024", {"chunk_limits": [1024, 1]}))}
    assert all(r.prompt_len > 128 and r.gen_seq_len > 0 and r.text for r in runs.values())
    result = {
        "prompt_len": runs["unchunked"].prompt_len,
        "agree_128_vs_unchunked": runs["chunk_128"].output_tokens == runs["unchunked"].output_tokens,
        "agree_128_vs_1024": runs["chunk_128"].output_tokens == runs["chunk_1024"].output_tokens,
        "texts": {k: r.text for k, r in runs.items()},
        "prefill_us": {k: r.prefill_us for k, r in runs.items()},
    }
    record_property("chunked_prefill", json.dumps(result))
    print(json.dumps(result, indent=1))
