"""Incremental, atomic, content-addressed sync, on the host as the device (LocalTransport)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.errors import ArtifactError, ConnectionDropped, ProvisionError, RemoteNoSpaceError
from harness.pairs import BackendPair
from harness.provision import (
    LOCAL_MANIFEST_NAME,
    HashCache,
    NullProgress,
    device_status,
    list_files,
    provision_model,
    read_local_manifest,
    remove_set,
    sync_set,
)
from tests.provision.conftest import PREFLIGHT_SHELLS, CountingTransport, local_device

Q = NullProgress()


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and not p.name.startswith(LOCAL_MANIFEST_NAME)}


def _total(root: Path) -> int:
    return sum(len(b) for b in _tree(root).values())


def test_first_push_then_unchanged_costs_one_round_trip(transport: CountingTransport, qwen3_export: Path,
                                                        cache: HashCache, tmp_path: Path):
    first = provision_model(transport, qwen3_export, cache=cache, progress=Q)
    assert first.remote_dir == f"{transport.device.work_dir}/models/qwen3-0.6b"
    assert first.bytes_sent == transport.pushed_bytes == _total(qwen3_export)
    # probe (+prepare, df), commit (places the last batch, +manifest): not per file; the preflight's query
    assert transport.shells == 2 + PREFLIGHT_SHELLS
    assert _tree(Path(first.remote_dir)) == _tree(qwen3_export)
    assert first.model_type == "qwen3" and first.configs[BackendPair.parse("qnn")] == "config_qnn.json"

    transport.reset_counts()
    fresh_cache = HashCache(tmp_path / "hashes.json")  # a new process: the cache comes from disk
    again = provision_model(transport, qwen3_export, cache=fresh_cache, progress=Q)
    assert (again.bytes_sent, again.files_sent) == (0, 0)
    assert transport.pushed_bytes == 0 and transport.pushed_files == []
    assert transport.shells == 0  # manifests (the set's, the runtimes') and stats over the file protocol: no process
    assert fresh_cache.hashed_bytes == 0  # nothing re-hashed


def test_one_changed_file_sends_that_file(transport, qwen3_export, cache):
    provision_model(transport, qwen3_export, cache=cache, progress=Q)
    transport.reset_counts()
    cfg = qwen3_export / "config_qnn.json"
    data = json.loads(cfg.read_text())
    data["thread_num"] = 2
    cfg.write_text(json.dumps(data))
    res = provision_model(transport, qwen3_export, cache=cache, progress=Q)
    assert res.files_sent == 1 and res.bytes_sent == cfg.stat().st_size
    assert transport.pushed_files[0] == "config_qnn.json"
    assert _tree(Path(res.remote_dir)) == _tree(qwen3_export)


def test_removed_file_is_removed_on_device_and_extra_device_files_are_left(transport, qwen3_export, cache):
    res = provision_model(transport, qwen3_export, cache=cache, progress=Q)
    remote = Path(res.remote_dir)
    (remote / "runner_output.txt").write_text("written by a test run")
    (qwen3_export / "llm.mnn.json").unlink(missing_ok=True)
    (qwen3_export / "virtual_behaviour.json").unlink()
    res = provision_model(transport, qwen3_export, cache=cache, progress=Q)
    assert not (remote / "virtual_behaviour.json").exists()
    assert (remote / "runner_output.txt").exists()  # not ours: never deleted


def test_file_deleted_on_the_device_is_sent_again_alone(transport, qwen3_export, cache):
    res = provision_model(transport, qwen3_export, cache=cache, progress=Q)
    remote = Path(res.remote_dir)
    (remote / "tokenizer.mtok").unlink()  # someone removed a file on the device
    transport.reset_counts()
    again = provision_model(transport, qwen3_export, cache=cache, progress=Q)
    assert again.files_sent == 1 and transport.pushed_files == ["tokenizer.mtok"]
    assert (remote / "tokenizer.mtok").read_bytes() == (qwen3_export / "tokenizer.mtok").read_bytes()


def test_device_file_replaced_in_place_is_detected(transport, qwen3_export, cache):
    res = provision_model(transport, qwen3_export, cache=cache, progress=Q)
    target = Path(res.remote_dir) / "config.json"
    target.unlink()
    target.write_text("{}")  # new inode, other size: not what the manifest recorded
    again = provision_model(transport, qwen3_export, cache=cache, progress=Q)
    assert target.read_bytes() == (qwen3_export / "config.json").read_bytes()
    assert again.files_sent == 1


def test_equal_contents_are_stored_once_across_sets(transport, qwen3_export, cache, tmp_path):
    provision_model(transport, qwen3_export, cache=cache, progress=Q)
    copy = tmp_path / "exports" / "qwen3-copy"
    os.system(f"cp -a {qwen3_export} {copy}")
    transport.reset_counts()
    res = provision_model(transport, copy, cache=cache, progress=Q)
    assert res.bytes_sent == 0 and res.files_sent == 0  # every content is already a blob
    a = Path(transport.device.work_dir) / "models/qwen3-0.6b/llm.mnn.weight"
    b = Path(res.remote_dir) / "llm.mnn.weight"
    assert a.stat().st_ino == b.stat().st_ino  # stored once
    status = device_status(transport)
    assert [s.name for s in status.sets] == ["qwen3-0.6b", "qwen3-copy"] and status.ok
    assert status.stored_bytes == _total(qwen3_export)
    remove_set(transport, "model", "qwen3-0.6b")  # the other set keeps its (shared) files
    assert b.read_bytes() == (copy / "llm.mnn.weight").read_bytes()
    assert [s.name for s in device_status(transport).sets] == ["qwen3-copy"]


def test_interrupted_push_leaves_no_truncated_file_and_resumes(transport, qwen3_export, cache):
    files = list_files(qwen3_export)
    transport.fail_push_at = 4
    with pytest.raises(ConnectionDropped, match="resumes from there"):
        provision_model(transport, qwen3_export, cache=cache, progress=Q)
    work = Path(transport.device.work_dir)
    expected = {f.rel: f.size for f in files}
    model = work / "models/qwen3-0.6b"
    placed = [p for p in model.rglob("*") if p.is_file()]
    assert len(placed) == 3  # the three complete pushes were put in place
    for p in placed:
        assert p.stat().st_size == expected[p.relative_to(model).as_posix()]
    assert not (work / "manifests/models/qwen3-0.6b.json").exists()
    assert len((work / "manifests/models/qwen3-0.6b.journal").read_text().splitlines()) == 3
    status = device_status(transport)
    assert status.unfinished == ["qwen3-0.6b"] and status.leftover_files == 0  # the half file was dropped

    transport.fail_push_at = None
    transport.reset_counts()
    res = provision_model(transport, qwen3_export, cache=cache, progress=Q)
    assert res.files_sent == len(files) - 3
    assert _tree(Path(res.remote_dir)) == _tree(qwen3_export)
    status = device_status(transport)
    assert status.ok and not status.unfinished
    assert not (work / "manifests/models/qwen3-0.6b.journal").exists()


def test_killed_push_without_clean_up_still_never_shows_a_partial_file(transport, qwen3_export, cache):
    transport.fail_push_at = 2
    transport.fail_shells_after_drop = True  # the link is gone: no salvage, like a killed process
    with pytest.raises(ConnectionDropped):
        provision_model(transport, qwen3_export, cache=cache, progress=Q)
    work = Path(transport.device.work_dir)
    assert len([p for p in (work / ".incoming").rglob("*") if p.is_file()]) == 2  # under .incoming only
    assert not (work / "models/qwen3-0.6b").exists()
    fresh = CountingTransport(transport.device)
    res = provision_model(fresh, qwen3_export, cache=cache, progress=Q)
    assert _tree(Path(res.remote_dir)) == _tree(qwen3_export)


def test_not_enough_space_is_refused_before_pushing(transport, qwen3_export, cache):
    transport.free = 1000
    with pytest.raises(RemoteNoSpaceError) as err:
        provision_model(transport, qwen3_export, cache=cache, progress=Q)
    msg = str(err.value)
    assert transport.device.name in msg and f"({_total(qwen3_export)} bytes" in msg and "(1000 bytes) free" in msg
    assert transport.pushed_bytes == 0


def test_arch_mismatch_refused_before_any_device_call(tmp_path, qwen3_export, cache):
    v75 = CountingTransport(local_device(tmp_path / "dev75", soc_model="SM8650", soc_id=57, htp_arch="v75"))
    with pytest.raises(ArtifactError, match="HTP v79"):
        provision_model(v75, qwen3_export, cache=cache, progress=Q)
    assert v75.shells == 0 and v75.pushed_bytes == 0


def test_sha256_verification_rejects_a_corrupted_arrival(transport, qwen3_export, cache):
    class Corrupting(CountingTransport):
        def _push_file(self, local, remote, mode, progress):
            n = super()._push_file(local, remote, mode, progress)
            if local.name == "tokenizer.mtok":
                with open(remote, "r+b") as f:
                    f.write(b"X")  # same size, other bytes
            return n

    t = Corrupting(transport.device)
    with pytest.raises(ProvisionError, match="did not arrive intact"):
        provision_model(t, qwen3_export, cache=cache, progress=Q, verify="sha256")
    assert not (Path(t.device.work_dir) / "models/qwen3-0.6b/tokenizer.mtok").exists()
    # with the default size check the same corruption would pass: that is the documented trade


def _snapshot(root: Path) -> dict[str, tuple[int, int, bytes | str]]:
    """Every entry under root, hidden ones too: mode, mtime and content (or link target)."""
    out: dict[str, tuple[int, int, bytes | str]] = {}
    for p in sorted([root, *root.rglob("*")]):
        st = os.lstat(p)
        body: bytes | str = os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else b""
        out[p.relative_to(root).as_posix()] = (st.st_mode, st.st_mtime_ns, body)
    return out


def test_local_manifest_goes_to_the_user_cache_and_the_export_is_untouched(transport, qwen3_export, cache,
                                                                           tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "user-cache"))
    before = _snapshot(qwen3_export)
    provision_model(transport, qwen3_export, cache=cache, progress=Q)
    assert _snapshot(qwen3_export) == before  # nothing written beside the export, not even a hidden file
    m = read_local_manifest(qwen3_export)
    assert m is not None and m.name == "qwen3-0.6b" and "llm.mnn.weight" in m.files
    assert m.files["llm.mnn.weight"].sha256 == cache.digest(qwen3_export / "llm.mnn.weight")
    assert not m.device  # device stamps stay on the device
    root = tmp_path / "user-cache"
    found = {p.relative_to(root).parts[0] for p in root.rglob("*.json")}
    # the manifest, beside the host QNN's own memos of the export's real binaries (qnn-sdk/, qnn-*.json)
    assert "manifests" in found and all(f == "manifests" or f.startswith("qnn") for f in found), found
    assert [p.parent for p in root.glob("manifests/*.json")] == [root / "manifests"]
    # Keyed by the resolved path: the same export through a symlink is the same entry.
    link = tmp_path / "via-link"
    link.symlink_to(qwen3_export)
    assert read_local_manifest(link) == m


def test_a_read_only_export_provisions_and_stays_byte_identical(tmp_path, qwen3_export):
    """A real read-only mount (a bind mount in a private namespace, so root cannot write
    either): provisioning works and leaves the folder as it was."""
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) is not installed: cannot make a read-only mount")
    ro = tmp_path / "ro-export"
    ro.mkdir()
    before = _snapshot(qwen3_export)
    child = ("import sys; from pathlib import Path; from harness.provision import NullProgress, provision_model; "
             "from harness.transport.local import LocalTransport; from tests.provision.conftest import local_device; "
             "r = provision_model(LocalTransport(local_device(Path(sys.argv[1]))), Path(sys.argv[2]), "
             "progress=NullProgress()); print(r.files_sent)")
    script = ('mount --bind "$2" "$3" && mount -o remount,bind,ro "$3" && touch "$3/probe" 2>/dev/null '
              '&& { echo "the mount is writable"; exit 9; }; exec "$1" -c "$4" "$5" "$3"')
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here ({probe.stderr.strip()})")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "HARNESS_CACHE_DIR": str(tmp_path / "user-cache")}
    run = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", sys.executable, str(qwen3_export), str(ro),
                          child, str(tmp_path / "device")], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert int(run.stdout.split()[-1]) == sum(1 for p in qwen3_export.rglob("*") if p.is_file())
    assert _snapshot(qwen3_export) == before
    assert list((tmp_path / "user-cache" / "manifests").glob("*.json"))


def test_mode_is_kept(transport, tmp_path, cache):
    src = tmp_path / "set"
    src.mkdir()
    (src / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (src / "run.sh").chmod(0o755)
    (src / "data.txt").write_text("x")
    res = sync_set(transport, list_files(src), kind="runtime", name="tools", cache=cache, progress=Q)
    assert os.stat(Path(res.remote_dir) / "run.sh").st_mode & 0o111
    assert res.manifest.files["run.sh"].mode == 0o755


def test_status_reports_damage(transport, qwen3_export, cache):
    res = provision_model(transport, qwen3_export, cache=cache, progress=Q)
    (Path(res.remote_dir) / "config.json").unlink()
    with open(Path(res.remote_dir) / "tokenizer.mtok", "ab") as f:
        f.write(b"!")
    status = device_status(transport)
    text = str(status)
    assert not status.ok and "config.json: missing" in text and "tokenizer.mtok: " in text
    provision_model(transport, qwen3_export, cache=cache, progress=Q)
    assert device_status(transport).ok


def test_exec_bit_is_added_to_a_shared_content(transport, tmp_path, cache):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "tool").write_text("#!/bin/sh\n")
    (b / "tool").write_text("#!/bin/sh\n")
    (b / "tool").chmod(0o755)
    sync_set(transport, list_files(a), kind="runtime", name="a", cache=cache, progress=Q)
    res = sync_set(transport, list_files(b), kind="runtime", name="b", cache=cache, progress=Q)
    assert res.files_sent == 0 and res.files_linked == 1
    assert os.stat(Path(res.remote_dir) / "tool").st_mode & 0o111


def test_many_files_are_batched_and_a_big_manifest_is_pushed(transport, tmp_path, cache):
    src = tmp_path / "many"
    long = "x" * 90
    for i in range(400):
        d = src / f"sub{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{long}-{i:04d}.bin").write_bytes(i.to_bytes(4, "little") * 8)
    files = list_files(src)
    res = sync_set(transport, files, kind="model", name="many", cache=cache, progress=Q)
    assert len(res.manifest.to_json()) > 64 << 10
    assert "manifest.json" in transport.pushed_files  # too big to travel inside a command
    assert _tree(Path(res.remote_dir)) == _tree(src)
    transport.reset_counts()
    again = sync_set(transport, files, kind="model", name="many", cache=cache, progress=Q)
    assert again.unchanged and transport.shells == 0 and transport.pushed_bytes == 0
    # Every file renamed: contents are linked from their old names (no push), the old names
    # go; that much work takes several commands.
    renamed = tmp_path / "renamed"
    for f in files:
        dst = renamed / f.rel.replace(long, "y" * 90)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(f.path.read_bytes())
    transport.reset_counts()
    moved = sync_set(transport, list_files(renamed), kind="model", name="many", cache=cache, progress=Q)
    assert moved.files_sent == 0 and moved.files_linked == 400 and moved.files_removed == 400
    assert transport.shells >= 3
    assert _tree(Path(moved.remote_dir)) == _tree(renamed)


def test_renamed_file_is_linked_from_its_old_name(transport, qwen3_export, cache):
    provision_model(transport, qwen3_export, cache=cache, progress=Q)
    (qwen3_export / "tokenizer.mtok").rename(qwen3_export / "tokenizer.bak")
    res = sync_set(transport, list_files(qwen3_export), kind="model", name="qwen3-0.6b", cache=cache, progress=Q)
    assert res.files_sent == 0 and res.files_linked == 1 and res.files_removed == 1
    assert _tree(Path(res.remote_dir)) == _tree(qwen3_export)


def test_the_provisioned_model_says_visual_from_the_export_not_from_its_pair_names(
        transport: CountingTransport, qwen3_vl_export: Path, qwen3_export: Path, cache: HashCache):
    # A VL export made for the CPU only (llmexport without the NPU step): no qnn/qnn config,
    # yet its image prompts must still run (the lab job once keyed them on "qnn/qnn").
    for name in ("config_qnn.json", "config_qnn_cpu_visual.json", "config_cpu_llm_qnn_visual.json"):
        (qwen3_vl_export / name).unlink()
    vl = provision_model(transport, qwen3_vl_export, cache=cache, progress=Q)
    assert list(vl.configs) == ["cpu/cpu"] and vl.visual
    assert not provision_model(transport, qwen3_export, cache=cache, progress=Q).visual


def test_a_stray_file_in_the_way_of_the_new_tree_is_cleared(transport: CountingTransport, tmp_path: Path,
                                                              cache: HashCache):
    """Something not in any manifest (a person's copy, an older tool) under a name the export
    now needs as a file, or as a folder, does not stop the push."""
    local = tmp_path / "export"
    local.mkdir()
    (local / "keep.bin").write_bytes(b"k" * 10)
    first = sync_set(transport, list_files(local), kind="model", name="stray", cache=cache, progress=Q)
    remote = Path(first.remote_dir)
    (remote / "a").mkdir()
    (remote / "a" / "junk").write_bytes(b"j")  # a folder where the file a goes
    (remote / "b").write_bytes(b"x")  # a file where the folder b goes
    (local / "a").write_bytes(b"a" * 11)
    (local / "b").mkdir()
    (local / "b" / "c").write_bytes(b"c" * 12)
    sync_set(transport, list_files(local), kind="model", name="stray", cache=cache, progress=Q)
    assert _tree(remote) == _tree(local)
