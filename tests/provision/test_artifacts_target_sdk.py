"""Provisioning's soc/arch guard with the sidecar optional: the context binaries tell the target
through the QNN SDK's qnn-context-binary-utility; without SDK or sidecar it is unknown (refused
unless allowed), never guessed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ArtifactError
from harness.provision import check_target, load_export
from harness.qnn import HOST_QNN_SWITCH
from tests.provision.conftest import local_device
from virtual_lab.exports import make_qwen3_export, write_sdk_tool


@pytest.fixture
def sdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The SDK tool is the source where the host has no QAIRT library of its own: these tests
    switch the host's off (the virtual lab's tool stand-in reads real binaries with it all the same)."""
    monkeypatch.setenv(HOST_QNN_SWITCH, "off")
    write_sdk_tool(tmp_path / "sdk" / "bin" / "x86_64-linux-clang")
    return tmp_path / "sdk"


def test_target_from_the_context_binaries_without_sidecar(tmp_path: Path, sdk: Path) -> None:
    make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=3, sidecar=False, soc_id=57, dsp_arch="v75")
    unknown = load_export(tmp_path / "m")
    assert unknown.target is None
    with pytest.raises(ArtifactError, match=r"without a recorded target.*--qnn-sdk"):
        check_target(unknown, local_device(tmp_path))
    art = load_export(tmp_path / "m", qnn_sdk=sdk)
    assert art.target is not None
    assert (art.target.soc_id, art.target.htp_arch) == (57, "v75")
    assert "qnn-context-binary-utility (qnn/graphllm0.bin)" in art.target.source
    with pytest.raises(ArtifactError, match=r"HTP v75.*--dsp_arch v79"):
        check_target(art, local_device(tmp_path))  # a v79 device
    check_target(art, local_device(tmp_path, soc_model="SM8650", soc_id=57, htp_arch="v75"))


def test_binaries_and_a_stale_sidecar_disagree(tmp_path: Path, sdk: Path) -> None:
    make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=3, soc_id=57, dsp_arch="v75")
    manifest = tmp_path / "m" / "qnn/export_manifest.json"
    manifest.write_text(manifest.read_text().replace('"soc_id": 57', '"soc_id": 69').replace('"v75"', '"v79"'))
    target = load_export(tmp_path / "m").target
    assert target is not None and target.soc_id == 69  # the sidecar alone
    with pytest.raises(ArtifactError, match="disagrees with itself"):
        load_export(tmp_path / "m", qnn_sdk=sdk)


def test_provisioning_reads_the_target_from_the_binaries_before_a_byte_moves(tmp_path: Path, sdk: Path) -> None:
    """The front doors pass --qnn-sdk / options.qnn_sdk on to provision_model: a v75 export
    without a sidecar is refused on a v79 device by what its context binaries say."""
    from harness.provision import provision_model
    from harness.transport import LocalTransport

    make_qwen3_export(tmp_path / "m", size_mb=0.5, n_llm_graphs=3, sidecar=False, soc_id=57, dsp_arch="v75")
    device = local_device(tmp_path)  # SM8750, v79
    with LocalTransport(device) as t:
        with pytest.raises(ArtifactError, match=r"HTP v75.*--dsp_arch v79"):
            provision_model(t, tmp_path / "m", qnn_sdk=sdk)
        assert not t.exists(f"{device.work_dir}/models/m")
