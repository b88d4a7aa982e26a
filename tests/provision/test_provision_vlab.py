"""Provisioning through the virtual lab: a real adb server, emulated adbd devices (whose own
counters say what crossed the wire), faults injected on the device side, and the ssh board."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import pytest

from harness.errors import ArtifactError, ConnectionDropped, ProvisionError, RemoteNoSpaceError
from harness.hostfiles import FileKey
from harness.provision import HashCache, NullProgress, device_status, list_files, provision_model, provision_runtime, sha256_file
from harness.transport import NO_RETRY, open_transport

Q = NullProgress()
WORK = "/data/local/tmp/harness"


def _counters(dev) -> dict:
    return dev.counters_snapshot()


def _delta(after: dict, before: dict, key: str) -> int:
    return after[key] - before[key]


def _export(tmp_path: Path, name: str, **knobs) -> Path:
    from virtual_lab.exports import make_qwen3_export

    dst = tmp_path / name
    # A seed per name: the shared lab's device must not already hold these contents from
    # another test (equal contents are linked, not pushed).
    knobs.setdefault("seed", zlib.crc32(name.encode()) & 0xFFFF)
    make_qwen3_export(dst, size_mb=knobs.pop("size_mb", 2), n_llm_graphs=knobs.pop("n_llm_graphs", 4), **knobs)
    return dst


def _device_tree(dev, remote_dir: str) -> dict[str, int]:
    root = dev.host_path(remote_dir)
    return {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _local_sizes(export: Path) -> dict[str, int]:
    return {f.rel: f.size for f in list_files(export)}


def test_first_push_unchanged_and_one_change_by_the_devices_counters(vlab_factory, tmp_path):
    from virtual_lab.lab import LabDeviceConfig

    # A device of its own: contents other tests pushed would be linked, not sent.
    vlab = vlab_factory([LabDeviceConfig("oneplus13")])
    export = _export(tmp_path, "qwen3-counters")
    dev = vlab.adb_device("oneplus13")
    cache = HashCache(tmp_path / "hashes.json")
    with open_transport(vlab.inventory.get("oneplus13")) as t:
        before = _counters(dev)
        first = provision_model(t, export, cache=cache, progress=Q)
        after = _counters(dev)
        manifest = dev.host_path(f"{WORK}/manifests/models/qwen3-counters.json")
        total = sum(_local_sizes(export).values())
        assert first.bytes_sent == total and manifest.is_file()
        # Exactly the export's bytes cross the wire (the manifest travels inside a command).
        assert _delta(after, before, "send_bytes") == total
        assert _delta(after, before, "send_files") == len(_local_sizes(export))
        assert _device_tree(dev, first.remote_dir) == _local_sizes(export)
        # A cold cache: each file was hashed from the chunks that were sent, not read twice.
        assert cache.hashed_bytes == 0
        shas = {rel: e["sha256"] for rel, e in json.loads(manifest.read_text())["files"].items()}
        assert shas == {f.rel: sha256_file(f.path) for f in list_files(export)}
        assert cache.lookup(FileKey.of(export / "llm.mnn.weight")) == shas["llm.mnn.weight"]

        before = _counters(dev)
        again = provision_model(t, export, cache=HashCache(tmp_path / "hashes.json"), progress=Q)
        after = _counters(dev)
        assert (again.bytes_sent, again.files_sent) == (0, 0)
        assert _delta(after, before, "send_bytes") == 0 and _delta(after, before, "send_files") == 0
        # Answered over the file protocol alone, in the sync session the first push left open
        # (kept for the batch): no new session and no device process; the load preflight's query
        # of the runtimes' QAIRT rides the sync's first round trip (provision/loadcheck.py).
        opened = {svc: _delta_opens(after, before, svc) for svc in after["service_opens"]}
        assert sum(opened.values()) == 0, opened

    with open_transport(vlab.inventory.get("oneplus13")) as t:
        # A new process (new transport): manifest and stats share one sync session.
        before = _counters(dev)
        again = provision_model(t, export, cache=HashCache(tmp_path / "hashes.json"), progress=Q)
        after = _counters(dev)
        assert again.bytes_sent == 0 and _delta_opens(after, before, "sync") == 1
        opened = {svc: _delta_opens(after, before, svc) for svc in after["service_opens"] if svc != "sync"}
        assert sum(opened.values()) == 0, opened  # the preflight's query rode the sync session

        cfg = export / "config_qnn.json"
        data = json.loads(cfg.read_text())
        data["thread_num"] = 2
        cfg.write_text(json.dumps(data, indent=2))
        before = _counters(dev)
        changed = provision_model(t, export, cache=cache, progress=Q)
        after = _counters(dev)
        assert changed.files_sent == 1 and changed.bytes_sent == cfg.stat().st_size
        assert _delta(after, before, "send_bytes") == cfg.stat().st_size
        assert _delta(after, before, "send_files") == 1
        assert json.loads(dev.host_path(f"{first.remote_dir}/config_qnn.json").read_text())["thread_num"] == 2
        assert device_status(t).ok


def _delta_opens(after: dict, before: dict, service: str) -> int:
    return after["service_opens"].get(service, 0) - before["service_opens"].get(service, 0)


def test_drop_during_push_without_retry_then_resume(vlab_factory, tmp_path):
    from virtual_lab.lab import LabDeviceConfig

    lab = vlab_factory([LabDeviceConfig("oneplus13")])
    export = _export(tmp_path, "qwen3-drop", size_mb=4)
    dev = lab.adb_device("oneplus13")
    sizes = _local_sizes(export)
    cache = HashCache(tmp_path / "hashes.json")
    t = open_transport(lab.inventory.get("oneplus13"), retry=NO_RETRY)
    try:
        dev.faults.drop_after_bytes(sum(sizes.values()) // 2, keep_partial=True)
        with pytest.raises((ConnectionDropped, ProvisionError)):
            provision_model(t, export, cache=cache, progress=Q)
        assert _counters(dev)["faults"]["drops_fired"] == 1
        remote = f"{WORK}/models/qwen3-drop"
        placed = _device_tree(dev, remote) if dev.host_path(remote).exists() else {}
        assert all(sizes[rel] == size for rel, size in placed.items())  # nothing truncated in place
        assert not dev.host_path(f"{WORK}/manifests/models/qwen3-drop.json").exists()

        before = _counters(dev)
        res = provision_model(t, export, cache=cache, progress=Q)
        after = _counters(dev)
        assert _device_tree(dev, res.remote_dir) == sizes
        assert res.files_sent == len(sizes) - len(placed)  # resumed: placed files were not sent again
        assert _delta(after, before, "send_bytes") < sum(sizes.values()) or not placed
        assert device_status(t).ok
    finally:
        t.close()


def test_drop_during_push_is_absorbed_by_the_transport_retry(vlab_factory, tmp_path):
    from virtual_lab.lab import LabDeviceConfig

    lab = vlab_factory([LabDeviceConfig("oneplus13")])
    export = _export(tmp_path, "qwen3-retry", size_mb=4)
    dev = lab.adb_device("oneplus13")
    dev.faults.drop_after_bytes(3 << 20, keep_partial=True)
    with open_transport(lab.inventory.get("oneplus13")) as t:
        res = provision_model(t, export, cache=HashCache(), progress=Q)
        assert _counters(dev)["faults"]["drops_fired"] == 1
        assert _device_tree(dev, res.remote_dir) == _local_sizes(export)
        assert device_status(t).ok


def test_full_disk_is_refused_before_pushing(vlab, tmp_path):
    export = _export(tmp_path, "qwen3-enospc")
    dev = vlab.adb_device("oneplus13")
    need = sum(_local_sizes(export).values())
    dev.faults.set_free_bytes(need // 2)
    try:
        with open_transport(vlab.inventory.get("oneplus13")) as t:
            before = _counters(dev)
            with pytest.raises(RemoteNoSpaceError) as err:
                provision_model(t, export, cache=HashCache(), progress=Q)
            after = _counters(dev)
    finally:
        dev.faults.clear()
    msg = str(err.value)
    m = re.search(r"^oneplus13: not enough space .* \((\d+) bytes, \d+ files\), .* \((\d+) bytes\) free", msg)
    assert m, msg
    needed, free = int(m.group(1)), int(m.group(2))
    assert needed <= need and free < needed and free <= need // 2 + (64 << 10)  # df counts KiB, dirs use some
    assert _delta(after, before, "send_bytes") == 0


def test_arch_mismatch_refused_before_any_byte_moves(vlab, tmp_path):
    export = _export(tmp_path, "qwen3-v79", soc_id=69, dsp_arch="v79")
    dev = vlab.adb_device("sm8650-qrd")
    with open_transport(vlab.inventory.get("sm8650-qrd")) as t:
        before = _counters(dev)
        with pytest.raises(ArtifactError) as err:
            provision_model(t, export, cache=HashCache(), progress=Q)
        after = _counters(dev)
    assert "HTP v79" in str(err.value) and "sm8650-qrd" in str(err.value)
    assert after["service_opens"] == before["service_opens"] and _delta(after, before, "send_bytes") == 0


def test_missing_qnn_library_is_named(vlab, tmp_path):
    from virtual_lab.runtime import make_runtime_dir

    rt = make_runtime_dir(tmp_path / "rt", "v75")
    (rt / "libQnnHtpV75Skel.so").unlink()
    dev = vlab.adb_device("sm8650-qrd")
    with open_transport(vlab.inventory.get("sm8650-qrd")) as t:
        before = _counters(dev)
        with pytest.raises(ArtifactError, match=r"missing libQnnHtpV75Skel\.so"):
            provision_runtime(t, rt, cache=HashCache(), progress=Q)
        assert _counters(dev)["send_bytes"] == before["send_bytes"]
        # The SoC's libraries from the lab's QNN SDK complete it.
        res = provision_runtime(t, rt, qnn_sdk=vlab.qnn_sdk_dir, cache=HashCache(), progress=Q)
    assert "libQnnHtpV75Skel.so" in _device_tree(dev, res.remote_dir)


def test_provisioned_runtime_runs_the_provisioned_model(vlab, tmp_path):
    export = _export(tmp_path, "qwen3-run")
    with open_transport(vlab.inventory.get("oneplus13")) as t:
        cache = HashCache()
        rt = provision_runtime(t, vlab.runtime_dir("v79"), cache=cache, progress=Q)
        model = provision_model(t, export, cache=cache, progress=Q)
        prompt = tmp_path / "prompt.txt"
        prompt.write_text("What is the capital of France?\n")
        t.push(prompt, f"{WORK}/prompt-run.txt")
        res = t.shell([rt.runner, f"{model.remote_dir}/{model.configs['qnn']}", f"{WORK}/prompt-run.txt"],
                      cwd=WORK, env=rt.env(), timeout=60)
    assert "The capital of France is Paris." in res.stdout, res.stdout + res.stderr


def test_runtimes_share_qnn_libraries_on_the_device(vlab, tmp_path):
    dev = vlab.adb_device("oneplus13")
    with open_transport(vlab.inventory.get("oneplus13")) as t:
        cache = HashCache()
        mnn = provision_runtime(t, vlab.runtime_dir("v79"), cache=cache, progress=Q)
        before = _counters(dev)
        et = provision_runtime(t, vlab.runtime_dir("v79", kind="executorch"), cache=cache, progress=Q)
        after = _counters(dev)
    pushed = _delta(after, before, "send_bytes")
    shared = dev.host_path(f"{mnn.remote_dir}/libQnnHtpV79Skel.so")
    assert shared.stat().st_ino == dev.host_path(f"{et.remote_dir}/libQnnHtpV79Skel.so").stat().st_ino
    assert pushed < sum(_device_tree(dev, et.remote_dir).values())


def test_device_reporting_another_soc_is_refused(vlab_factory, tmp_path):
    from virtual_lab.lab import LabDeviceConfig

    # The inventory says SM8750 but the phone on that serial is an SM8650.
    lab = vlab_factory([LabDeviceConfig("oneplus13", props={"ro.soc.model": "SM8650"})])
    export = _export(tmp_path, "qwen3-wrong-phone")
    dev = lab.adb_device("oneplus13")
    with open_transport(lab.inventory.get("oneplus13")) as t:
        with pytest.raises(ProvisionError, match=r"ro\.soc\.model=SM8650"):
            provision_model(t, export, cache=HashCache(), progress=Q)
    assert _counters(dev)["send_bytes"] == 0


def test_ssh_board(vlab, tmp_path):
    export = _export(tmp_path, "qwen3-car", soc_id=39, dsp_arch="v68")
    cache = HashCache()
    with open_transport(vlab.inventory.get("sa8295-car")) as t:
        first = provision_model(t, export, cache=cache, progress=Q)
        assert first.bytes_sent == sum(_local_sizes(export).values())
        again = provision_model(t, export, cache=cache, progress=Q)
        assert again.bytes_sent == 0 and again.files_sent == 0
        status = device_status(t)
    assert status.ok and "qwen3-car" in str(status)
