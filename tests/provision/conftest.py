"""Helpers for provisioning tests: a LocalTransport that counts what crosses the "link" and
runs the device scripts under Android's shell and tools (mksh + toybox, virtual_lab.userland)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import weakref
from pathlib import Path

import pytest

from harness.errors import ConnectionDropped
from harness.inventory import LOCAL, DeviceSpec
from harness.provision import HashCache
from harness.transport import NO_RETRY, LocalTransport, RawExec
from virtual_lab.userland import find_userland

# The load preflight lists the device's runtime manifests (which QAIRT its runtimes are) the
# first time this host pushes a QNN export there, as the virtual lab's real binaries are: one
# device process; later pushes read the listed manifests in the sync's first round trip
# (harness/provision/loadcheck.py).
PREFLIGHT_SHELLS = 1


class CountingTransport(LocalTransport):
    """The host as a device, counting pushed bytes/files and shell commands. `fail_push_at`
    makes the Nth push (1-based) write half the file and then drop the link; `free` fakes
    the free space it reports."""

    def __init__(self, device: DeviceSpec, **kw):
        super().__init__(device, retry=NO_RETRY)
        # Android's /system/bin as the only PATH entry: `sh` is mksh, the tools are toybox's
        # Android applets; nothing from the host's /bin.
        self.system_bin = Path(tempfile.mkdtemp(prefix="harness-system-bin-"))
        weakref.finalize(self, shutil.rmtree, self.system_bin, True)
        self.userland = find_userland()
        self.userland.populate(self.system_bin)
        self.pushed_bytes = 0
        self.pushed_files: list[str] = []
        self.shells = 0
        self.fail_push_at: int | None = None
        self.fail_shells_after_drop = False
        self.free: int | None = None
        self._pushes = 0
        self._dropped = False

    def _exec(self, command, timeout):
        if self._dropped and self.fail_shells_after_drop:
            raise ConnectionDropped(f"{self.device.name}: connection lost (test)")
        self.shells += 1
        proc = subprocess.Popen([self.userland.mksh, "-c", command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={"PATH": str(self.system_bin), "HOME": "/", "LANG": "C.UTF-8"})
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            return RawExec(b"", b"", -1, timed_out=True)
        return RawExec(out, err, proc.returncode if proc.returncode >= 0 else 128 - proc.returncode)

    def _push_file(self, local: Path, remote: str, mode: int, progress):
        self._pushes += 1
        if self.fail_push_at is not None and self._pushes == self.fail_push_at:
            data = local.read_bytes()
            Path(remote).parent.mkdir(parents=True, exist_ok=True)
            Path(remote).write_bytes(data[: len(data) // 2])
            self.pushed_bytes += len(data) // 2
            self._dropped = True
            raise ConnectionDropped(f"{self.device.name}: connection dropped during push (test)")
        n = super()._push_file(local, remote, mode, progress)
        self.pushed_bytes += n
        self.pushed_files.append(local.name)
        return n

    def free_bytes(self, remote: str) -> int:
        return self.free if self.free is not None else super().free_bytes(remote)

    def reset_counts(self) -> None:
        self.pushed_bytes, self.pushed_files, self.shells = 0, [], 0


def local_device(work_dir: Path, soc_model="SM8750", soc_id=69, htp_arch="v79", name="bench") -> DeviceSpec:
    return DeviceSpec(name=name, transport=LOCAL, soc_model=soc_model, soc_id=soc_id, htp_arch=htp_arch,
                      vtcm_mb=8, work_dir=str(work_dir))


@pytest.fixture
def device_dir(tmp_path: Path) -> Path:
    d = tmp_path / "device"
    d.mkdir()
    return d


@pytest.fixture
def transport(device_dir: Path) -> CountingTransport:
    return CountingTransport(local_device(device_dir))


@pytest.fixture
def cache(tmp_path: Path) -> HashCache:
    return HashCache(tmp_path / "hashes.json")


@pytest.fixture
def qwen3_export(tmp_path: Path) -> Path:
    from virtual_lab.exports import make_qwen3_export

    dst = tmp_path / "exports" / "qwen3-0.6b"
    make_qwen3_export(dst, size_mb=2, n_llm_graphs=4)
    return dst


@pytest.fixture
def qwen3_vl_export(tmp_path: Path) -> Path:
    from virtual_lab.exports import make_qwen3_vl_export

    dst = tmp_path / "exports" / "qwen3-vl-2b"
    make_qwen3_vl_export(dst, size_mb=2, n_llm_graphs=3)
    return dst


def shared_models_dir() -> Path:
    return Path(__file__).resolve().parents[2] / ".." / "shared" / "models"


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
