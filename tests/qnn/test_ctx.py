"""harness.qnn.ctx / pte against the real libQnnSystem.so on ../shared's binaries: the project's
own ctypes layouts read what ExecuTorch's reader read (names, dims, datatypes, encodings), the
socModel each binary was compiled for, and the context binaries inside PTEs found by reading
the program's own format; corrupt copies are refused with the file named."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import soc
from harness.qnn import (
    BinaryInfo,
    ContextBinaryError,
    PteError,
    context_binaries,
    find_host_qnn,
    layouts,
    qnn_delegates,
    read_context_binary,
)
from tests.qnn.material import ET_QNN, et_qnn_or_skip, wheel_or_skip

pytestmark = pytest.mark.real_qnn

SOC_OF_NAME = {"sm8650": 57, "sm8750": 69, "sa8295": 39}


def _soc_in(name: str) -> int:
    return next(v for k, v in SOC_OF_NAME.items() if k in name)


def _arch_of(soc_id: int | None) -> str:
    info = soc.lookup_id(soc_id) if soc_id is not None else None
    assert info is not None, soc_id
    return info.htp_arch


def _ctx_files() -> list[Path]:
    return sorted(et_qnn_or_skip("ctx").glob("*.bin"))


def _ptes() -> list[Path]:
    et_qnn_or_skip("pte")
    return sorted(ET_QNN.glob("*/*.pte"))


def _read(path: Path) -> BinaryInfo:
    wheel_or_skip()
    return read_context_binary(path)


def test_the_layouts_have_the_c_sizes() -> None:
    assert ctypes.sizeof(layouts.Tensor) == 144 and ctypes.sizeof(layouts.QuantizeParams) == 40
    assert ctypes.sizeof(layouts.GraphInfo) == 8 + ctypes.sizeof(layouts.GraphInfoV3)


@pytest.mark.parametrize("name", ["lnprobe-qio-16a4w-ln16a16w-sm8650", "lnprobe-qio-16a4w-ln16a16w-sm8750",
                                  "qwen3-16a4w-sm8650", "qwen3-16a4w-sm8750"])
def test_a_context_binary_reads_as_executorchs_reader_saw_it(name: str) -> None:
    path = et_qnn_or_skip("ctx", f"{name}.bin")
    ref = json.loads(path.with_suffix(".json").read_text())
    assert hashlib.sha256(path.read_bytes()).hexdigest() == ref["sha256"]
    info = _read(path)
    assert info.soc_model == _soc_in(name) and info.htp_arch == _arch_of(_soc_in(name))
    # The HTP metadata names the same arch the SoC table gives, and the byte scan of the json saw.
    assert info.dsp_arch == info.htp_arch == f"v{ref['byte_scan']['arch'][0]}"
    assert info.qairt_build == ref["reader_versions"]["qairt_build"] == ref["byte_scan"]["build_strings"][0]
    assert (info.backend_id, info.info_version, info.size) == (6, 3, ref["bytes"])
    et_graphs = ref["et_reader"]["graphs"]
    assert [g.name for g in info.graphs] == [g["name"] for g in et_graphs]
    for mine, theirs in zip(info.graphs, et_graphs):
        for side in ("inputs", "outputs"):
            got, want = getattr(mine, side), theirs[side]
            assert [(t.name, list(t.dims), t.dtype) for t in got] == [(t["name"], t["dims"], t["dtype"]) for t in want]
            for t, w in zip(got, want):
                pairs = [(s["scale"], s["offset"]) for s in w["encoding"]["scale_offset"]]
                assert [(pytest.approx(s, rel=1e-6), o) for s, o in pairs] == list(t.encoding.scale_offset)
                assert t.encoding.kind == ("scale_offset" if pairs else "none")
    assert {t.tensor_type for g in info.graphs for t in g.inputs} == {"APP_WRITE"}
    assert {t.tensor_type for g in info.graphs for t in g.outputs} == {"APP_READ"}


def test_the_binaries_inside_every_pte_are_found_and_read() -> None:
    ptes = _ptes()
    assert len(ptes) >= 6, ptes
    for pte in ptes:
        build = json.loads(pte.with_suffix(".build.json").read_text()) if pte.with_suffix(".build.json").exists() else {}
        found = context_binaries(pte)
        if "delegate_calls" in build:
            assert len(found) == build["delegate_calls"], pte
        for d, raw in found:
            info = read_context_binary(raw, name=f"{pte}:{d.method}[{d.index}]") if found else None
            assert info is not None and info.soc_model == _soc_in(pte.name), pte
            if build.get("soc"):
                table = soc.lookup(build["soc"])
                assert table is not None and table.soc_id == info.soc_model
            assert info.qairt_build == build.get("versions", {}).get("qairt_build", info.qairt_build)
            assert info.graphs and all(g.inputs and g.outputs for g in info.graphs)
    sa8295 = read_context_binary(context_binaries(ET_QNN / "pte" / "lnprobe-8a8w-sa8295.pte")[0][1])
    assert (sa8295.soc_model, sa8295.htp_arch, sa8295.soc and sa8295.soc.model) == (39, "v68", "SA8295")


def test_the_pte_reader_finds_the_bytes_executorch_dumped() -> None:
    # ctx/qwen3-16a4w-sm8650.bin is ExecuTorch's dump_context_from_pte of pte/qwen3-16a4w-sm8650.pte.
    dumped = et_qnn_or_skip("ctx", "qwen3-16a4w-sm8650.bin").read_bytes()
    [(d, raw)] = context_binaries(ET_QNN / "pte" / "qwen3-16a4w-sm8650.pte")
    assert raw == dumped and (d.method, d.index, d.offset, d.size) == ("forward", 0, 1536, len(dumped))
    kv = qnn_delegates(et_qnn_or_skip("llm", "kv-16a8w-sm8650.pte"))
    assert [(x.method, x.index) for x in kv] == [("forward", 0), ("forward", 1)]


def test_a_truncated_or_corrupt_binary_is_refused_naming_the_file(tmp_path: Path) -> None:
    wheel_or_skip()
    src = et_qnn_or_skip("ctx", "qwen3-16a4w-sm8650.bin").read_bytes()
    cases = {"half.bin": src[: len(src) // 2], "head.bin": src[:100], "junk.bin": bytes(range(256)) * 20,
             "flipped.bin": bytes(b ^ 0xFF if 16 <= i < 4096 else b for i, b in enumerate(src)), "empty.bin": b""}
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(ContextBinaryError, match=rf"{p}: (not a context binary QNN's reader accepts|empty)"):
            read_context_binary(p)


def test_a_truncated_or_corrupt_pte_is_refused_naming_the_file(tmp_path: Path) -> None:
    src = et_qnn_or_skip("pte", "qwen3-16a4w-sm8650.pte").read_bytes()
    cut = tmp_path / "cut.pte"
    cut.write_bytes(src[:200_000])
    with pytest.raises(PteError, match=rf"{cut}: truncated: the QNN delegate's segment ends at byte 401224"):
        qnn_delegates(cut)
    tiny = tmp_path / "tiny.pte"
    tiny.write_bytes(src[:600])
    with pytest.raises(PteError, match=rf"{tiny}: "):
        qnn_delegates(tiny)
    not_pte = tmp_path / "not.pte"
    not_pte.write_bytes(b"PK\x03\x04 a zip, not a program" * 10)
    with pytest.raises(PteError, match=rf"{not_pte}: not an ExecuTorch program \(no 'ET12'"):
        qnn_delegates(not_pte)
    bad_magic = tmp_path / "magic.pte"
    bad_magic.write_bytes(src[:1280] + b"\0\0\0\0" + src[1284:])
    with pytest.raises(PteError, match=r"magic\.pte \(forward delegate 0\): the QNN payload starts with 0x00000000"):
        qnn_delegates(bad_magic)
    bad_size = tmp_path / "size.pte"
    bad_size.write_bytes(src[:1292] + (12345).to_bytes(8, "little") + src[1300:])
    with pytest.raises(PteError, match=r"header says a 12345-byte context binary"):
        qnn_delegates(bad_size)


def test_reading_needs_no_loader_path_and_prints_nothing(tmp_path: Path) -> None:
    wheel_or_skip()
    host = find_host_qnn(environ={}, cache_dir=tmp_path / "cache")
    binary = et_qnn_or_skip("ctx", "qwen3-16a4w-sm8750.bin")
    code = ("import sys, json; from pathlib import Path; from harness.qnn.ctx import read_context_binary; "
            "from harness.qnn.host import find_host_qnn; "
            f"i = read_context_binary(Path(sys.argv[1]), host=find_host_qnn(environ={{}}, cache_dir=Path({str(tmp_path / 'cache')!r}))); "
            "print(json.dumps([i.soc_model, i.qairt_build]))")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "QNN_SDK_ROOT")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, "-c", code, str(binary)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [69, host.qairt_build]  # stdout holds the JSON and nothing else


def test_an_mnn_layout_binary_goes_through_the_same_reader(tmp_path: Path) -> None:
    # No MNN export with real context binaries exists here (MNN's QNN step needs the SDK); its
    # qnn/graphllm<N>.bin are QNN context binaries like any other, read by the same call.
    wheel_or_skip()
    qnn = tmp_path / "export" / "qnn"
    qnn.mkdir(parents=True)
    (qnn / "graphllm0.bin").write_bytes(et_qnn_or_skip("ctx", "lnprobe-qio-16a4w-ln16a16w-sm8750.bin").read_bytes())
    info = read_context_binary(qnn / "graphllm0.bin")
    assert (info.soc_model, info.htp_arch, info.graphs[0].inputs[0].dims) == (69, "v79", (1, 32, 128))


@settings(max_examples=25)
@given(cut=st.integers(min_value=0, max_value=650_967),
       flips=st.lists(st.tuples(st.integers(min_value=0, max_value=4095), st.integers(0, 255)), max_size=6))
def test_a_damaged_pte_raises_only_pte_errors(tmp_path_factory: pytest.TempPathFactory, cut: int,
                                               flips: list[tuple[int, int]]) -> None:
    src = bytearray(et_qnn_or_skip("llm", "kv-16a8w-sm8650.pte").read_bytes())
    for at, value in flips:
        src[at] = value
    path = tmp_path_factory.mktemp("fuzz") / "x.pte"
    path.write_bytes(bytes(src[:cut]) if not flips else bytes(src))
    try:
        found = context_binaries(path)
    except PteError as exc:
        assert str(path) in str(exc)
        return
    wheel_or_skip()
    for d, raw in found:  # what the program reader let through, QNN's reader judges
        try:
            read_context_binary(raw, name=f"{path}#{d.index}")
        except ContextBinaryError as exc:
            assert str(path) in str(exc)
