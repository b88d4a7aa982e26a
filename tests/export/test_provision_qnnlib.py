"""Provisioning's target check reads the context binaries with the host's libQnnSystem.so, no
sidecar and no SDK: an export compiled for another SoC is refused before a byte moves (real
ExecuTorch PTEs and real binaries in an MNN layout), a damaged binary among good ones is named,
binaries from a newer QAIRT than the runtime's libraries are refused with both versions named,
and the static shape guards see the binary's real dims."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.checks.shapes import check_export_shapes
from harness.errors import ArtifactError
from harness.mnn_graph import dump_mnn, write_graph_mnn
from harness.provision import ModelArtifact, check_qairt, check_target, load_export, provision_model, pushed_runtime, resolve_runtime
from harness.qnn import find_host_qnn, scan_qairt_build
from harness.qnn.compiled_io import SOURCE_QNNLIB
from harness.transport import LocalTransport
from tests.provision.conftest import local_device
from tests.qnn.material import et_qnn_or_skip, wheel_or_skip
from virtual_lab.exports import make_qwen3_export

pytestmark = pytest.mark.real_qnn
SM8750_BIN = "lnprobe-qio-16a4w-ln16a16w-sm8750.bin"


@pytest.fixture(autouse=True)
def _real_material() -> None:
    wheel_or_skip()
    et_qnn_or_skip("ctx")


def _et_export(tmp_path: Path, pte: str) -> Path:
    export = tmp_path / "et"
    export.mkdir()
    shutil.copy(et_qnn_or_skip("pte", pte), export / "model.pte")
    shutil.copy(et_qnn_or_skip("llm", "tokenizer.json"), export / "tokenizer.json")
    return export


def _mnn_export(tmp_path: Path, binary: str = SM8750_BIN) -> Path:
    """A virtual MNN export (stub, configs) whose qnn/graphllm*.bin are real context binaries and
    which records no target of its own (no sidecar; llmexport's export_args.json names none)."""
    info = make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=2, sidecar=False, soc_id=57, dsp_arch="v75")
    for n in range(2):
        shutil.copy(et_qnn_or_skip("ctx", binary), info.path / "qnn" / f"graphllm{n}.bin")
    return info.path


def test_an_executorch_export_is_refused_on_another_soc_before_a_byte_moves(tmp_path: Path) -> None:
    export = _et_export(tmp_path, "lnprobe-8a8w-sa8295.pte")
    art = load_export(export)
    assert art.target is not None and (art.target.soc_id, art.target.htp_arch) == (39, "v68")
    assert art.target.source.startswith(f"{SOURCE_QNNLIB} (model.pte#forward[0])")
    assert art.target.qairt_build == find_host_qnn().qairt_build
    device = local_device(tmp_path / "dev")  # SM8750, v79
    with LocalTransport(device) as t:
        with pytest.raises(ArtifactError, match=r"compiled for soc_id 39 \(SA8295\), HTP v68 \(libQnnSystem") as err:
            provision_model(t, export)
        assert "llama.py --model SM8750" in str(err.value) and "--dsp_arch" not in str(err.value)  # ExecuTorch's terms
        assert not t.exists(f"{device.work_dir}/models/et")
    check_target(art, local_device(tmp_path / "dev", soc_model="SA8295", soc_id=39, htp_arch="v68"))


def test_an_mnn_exports_binaries_decide_its_target(tmp_path: Path) -> None:
    export = _mnn_export(tmp_path)
    art = load_export(export)
    assert art.target is not None and (art.target.soc_id, art.target.htp_arch) == (69, "v79")
    assert "qnn/graphllm0.bin, qnn/graphllm1.bin" in art.target.source
    with pytest.raises(ArtifactError, match=r"HTP v79 \(libQnnSystem.*needs HTP v75"):
        check_target(art, local_device(tmp_path, soc_model="SM8650", soc_id=57, htp_arch="v75"))
    check_target(art, local_device(tmp_path))
    (export / "export_args.json").write_text('{"soc_id": 57, "dsp_arch": "v75"}')
    with pytest.raises(ArtifactError, match="disagrees with itself"):
        load_export(export)


def test_a_damaged_binary_among_good_ones_is_named(tmp_path: Path) -> None:
    export = _mnn_export(tmp_path)
    good = (export / "qnn" / "graphllm1.bin").read_bytes()
    (export / "qnn" / "graphllm1.bin").write_bytes(good[: len(good) // 3])
    with pytest.raises(ArtifactError, match=r"accepts 1 of the export's context binaries but refuses 1: "
                                            r"qnn/graphllm1.bin: not a context binary QNN's reader accepts"):
        load_export(export)


def test_a_truncated_pte_is_refused(tmp_path: Path) -> None:
    export = _et_export(tmp_path, "qwen3-16a4w-sm8650.pte")
    data = (export / "model.pte").read_bytes()
    (export / "model.pte").write_bytes(data[:250_000])
    with pytest.raises(ArtifactError, match=r"model.pte: truncated or corrupt: its header says .* \(401224 bytes\), "
                                            r"the file has 250000"):
        load_export(export)


def _logged_build(version: str) -> str:
    log = et_qnn_or_skip("abi", f"run-qairt-{version}.log").read_text()
    m = re.search(r"QAIRT build (v[\d.]+)", log)
    assert m, log[:200]
    return m.group(1)


def test_binaries_newer_than_the_runtime_libraries_are_refused_naming_both(tmp_path: Path) -> None:
    art: ModelArtifact = load_export(_et_export(tmp_path, "qwen3-16a4w-sm8650.pte"))
    older = _logged_build("2.48.40")
    with pytest.raises(ArtifactError, match=r"built by QAIRT 2\.49\.40 .* the runtime pushed to the device is QAIRT "
                                            r"2\.48\.40 \(v2\.48\.40\.\d{12}\)"):
        check_qairt(art, pushed_runtime(older))
    check_qairt(art, pushed_runtime(art.target.qairt_build if art.target else None))  # the same release
    check_qairt(art, pushed_runtime(_logged_build("2.51.0")))  # newer libraries load older binaries
    check_qairt(art, None)  # the runtime's version unknown: no verdict
    device = local_device(tmp_path / "dev", soc_model="SM8650", soc_id=57, htp_arch="v75")
    with LocalTransport(device) as t:
        with pytest.raises(ArtifactError, match="QAIRT 2.48.40"):
            provision_model(t, tmp_path / "et", runtime_qairt_build=older)
        assert not t.exists(f"{device.work_dir}/models/et")


def test_the_runtime_librarys_build_is_read_from_its_bytes() -> None:
    host = find_host_qnn()
    assert scan_qairt_build(host.htp_lib) == host.qairt_build


def test_the_shape_guards_see_the_binarys_real_dims(tmp_path: Path) -> None:
    pytest.importorskip("MNN", reason="reading and writing the NPU stub needs the mnn extra")
    export = _mnn_export(tmp_path)
    # The stub claims what a good export would (input_ids [128,1,1024], graphs named as QNN's);
    # only the binary can say it was compiled for [1,32,128].
    stub = export / "qnn" / "llm.mnn"
    graph: dict[str, Any] = dump_mnn(stub)
    first, second = [op for op in graph["oplists"] if op.get("type") == "Plugin"]
    for op, shape in ((first, [128, 1, 1024]), (second, [1, 128, 1024])):
        attrs = {a["key"]: a for a in op["main"]["attr"]}
        attrs["allGraphName"]["list"]["s"] = ["forward"]
        attrs["allInputShape"]["list"]["i"] = shape
        op["main"]["attr"] = [a for a in op["main"]["attr"] if a["key"] != "o_1_0"]
    first["inputIndexes"] = [graph["tensorName"].index("input_ids")]
    {a["key"]: a for a in first["main"]["attr"]}["inputs"]["list"]["s"] = [f"t{first['inputIndexes'][0]}"]
    write_graph_mnn(graph, stub)
    findings = check_export_shapes(export)
    hidden = [f for f in findings if f.kind == "hidden_mismatch"]
    assert hidden and all(f.source == SOURCE_QNNLIB and f.found == "[1,32,128]" for f in hidden), findings


def test_the_runtime_bundle_names_the_qairt_of_its_libqnnhtp(tmp_path: Path) -> None:
    from virtual_lab.runtime import make_qnn_sdk, make_runtime_dir

    sdk = make_qnn_sdk(tmp_path / "qnn-sdk", arches=("v75",))
    runtime = make_runtime_dir(tmp_path / "rt", "v75", kind="mnn", with_qnn_libs=False)
    assert resolve_runtime(runtime, "v75", qnn_sdk=sdk).qairt_build is None  # the stand-in names no build
    host = find_host_qnn()
    (sdk / "lib" / "aarch64-android" / "libQnnHtp.so").unlink()
    (sdk / "lib" / "aarch64-android" / "libQnnHtp.so").symlink_to(host.htp_lib.resolve())
    bundle = resolve_runtime(runtime, "v75", qnn_sdk=sdk)
    assert bundle.qnn and bundle.qairt_build == host.qairt_build


def test_the_target_is_the_program_that_will_run(tmp_path: Path) -> None:
    export = _et_export(tmp_path, "lnprobe-8a8w-sa8295.pte")  # model.pte: SA8295
    shutil.copy(et_qnn_or_skip("pte", "qwen3-16a4w-sm8650.pte"), export / "other.pte")
    first = load_export(export)
    assert first.configs == {"qnn": "model.pte"} and first.target is not None and first.target.soc_id == 39
    (export / "export_manifest.json").write_text('{"model_path": "other.pte"}')
    chosen = load_export(export)
    assert chosen.configs == {"qnn": "other.pte"} and chosen.target is not None
    assert (chosen.target.soc_id, chosen.target.htp_arch) == (57, "v75") and "other.pte#forward[0]" in chosen.target.source
