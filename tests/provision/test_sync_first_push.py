"""A first push: files whose content may be on the device are hashed while the others travel;
the last batch is placed by the commit; the manifest is the same whatever the batching."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.provision import HashCache, NullProgress, device_status, provision_model, sha256_file
from harness.provision import sync as sync_mod
from tests.provision.conftest import PREFLIGHT_SHELLS, CountingTransport, local_device

Q = NullProgress()


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _device_manifest(transport: CountingTransport, name: str) -> dict:
    return json.loads((Path(transport.device.work_dir) / f"manifests/models/{name}.json").read_text())


def test_same_size_files_are_hashed_while_new_ones_travel(transport: CountingTransport, qwen3_export: Path,
                                                          cache: HashCache):
    provision_model(transport, qwen3_export, cache=cache, progress=Q)
    weight = qwen3_export / "llm.mnn.weight"
    data = bytearray(weight.read_bytes())
    data[0] ^= 0xFF  # same size, other content: only its hash can tell
    weight.write_bytes(bytes(data))
    (qwen3_export / "notes.txt").write_text("a file of a size the device holds nowhere")
    transport.reset_counts()
    cold = HashCache()  # nothing known here: every content of a size the device holds is hashed
    res = provision_model(transport, qwen3_export, cache=cold, progress=Q)
    # The new file went first, while the rest was hashed; then the changed weight, decided after.
    assert transport.pushed_files == ["notes.txt", "llm.mnn.weight"]
    assert res.files_sent == 2 and res.bytes_sent == len(data) + (qwen3_export / "notes.txt").stat().st_size
    assert _tree(Path(res.remote_dir)) == _tree(qwen3_export)
    shas = {rel: e["sha256"] for rel, e in _device_manifest(transport, "qwen3-0.6b")["files"].items()}
    assert shas == {p.relative_to(qwen3_export).as_posix(): sha256_file(p)
                    for p in qwen3_export.rglob("*") if p.is_file()}
    assert device_status(transport).ok


def test_only_same_size_files_left_are_decided_before_anything_moves(transport: CountingTransport,
                                                                     qwen3_export: Path, cache: HashCache):
    provision_model(transport, qwen3_export, cache=cache, progress=Q)
    transport.reset_counts()
    res = provision_model(transport, qwen3_export, cache=HashCache(), progress=Q)  # cold: all undecided
    assert res.files_sent == 0 and transport.pushed_files == []
    assert device_status(transport).ok


def test_batches_leave_the_same_manifest_as_one_push(tmp_path: Path, qwen3_export: Path, monkeypatch):
    one = CountingTransport(local_device(tmp_path / "one"))
    provision_model(one, qwen3_export, cache=HashCache(), progress=Q)
    assert one.shells == 2 + PREFLIGHT_SHELLS  # the probe, then the commit that places the only batch

    monkeypatch.setattr(sync_mod, "FLUSH_BYTES", 1)  # a batch per file: a place command each but the last
    many = CountingTransport(local_device(tmp_path / "many"))
    res = provision_model(many, qwen3_export, cache=HashCache(), progress=Q)
    n = len([p for p in qwen3_export.rglob("*") if p.is_file()])
    assert many.shells == 1 + (n - 1) + 1 + PREFLIGHT_SHELLS
    assert _tree(Path(res.remote_dir)) == _tree(qwen3_export)

    def comparable(t: CountingTransport) -> dict:
        m = _device_manifest(t, "qwen3-0.6b")
        return {**m, "remote_dir": "", "files": {rel: {k: v for k, v in e.items() if k not in ("inode", "mtime")}
                                                 for rel, e in m["files"].items()}}

    assert comparable(one) == comparable(many)
    for t in (one, many):  # the stamps recorded are the device's
        m = _device_manifest(t, "qwen3-0.6b")
        for rel, e in m["files"].items():
            st = os.stat(Path(m["remote_dir"]) / rel)
            assert (e["inode"], e["mtime"]) == (st.st_ino, int(st.st_mtime))
    assert not list((tmp_path / "many" / ".incoming").rglob("*.json"))
