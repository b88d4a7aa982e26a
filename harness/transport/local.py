"""The host itself as a device: for host builds of the runtimes (x86 `llm_demo`, the
`mnn`-engine host runtime). Same interface, so runners and checks do not care."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

from harness.errors import RemoteNoSpaceError, RemotePathError
from harness.inventory import LOCAL
from harness.transport.base import ProgressFn, Transport
from harness.transport.types import RawExec, RemoteStat

_CHUNK = 4 << 20


class LocalTransport(Transport):
    kind = LOCAL
    free_bytes_is_df = False  # free_bytes() asks the host OS, not `df -k`

    def _exec(self, command: str, timeout: float | None) -> RawExec:
        proc = subprocess.Popen(["sh", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Stop the whole session (the program too; the caller's kill by pid then finds it
            # gone) and keep what it printed: a timed-out run's output shows where it hung.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
            return RawExec(out, err, -1, timed_out=True)
        # Report a signal as the device shell does (128+N), not as Popen's -N.
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        return RawExec(out, err, code)

    def _push_file(self, local: Path, remote: str, mode: int, progress: ProgressFn | None) -> int:
        return _copy(local, Path(remote), mode, progress, self.device.name)

    def _pull_file(self, remote: str, local: Path, progress: ProgressFn | None) -> int:
        src = Path(remote)
        if not src.is_file():
            raise RemotePathError(f"{self.device.name}: {remote} does not exist", device=self.device.name)
        return _copy(src, local, None, progress, self.device.name)

    def stat(self, remote: str) -> RemoteStat | None:
        try:
            st = os.stat(remote)
        except (FileNotFoundError, NotADirectoryError):  # "a/b" where a is a file: absent, as adb's STA2 says
            return None
        return RemoteStat(remote, st.st_size, st.st_mode, int(st.st_mtime), st.st_ino)

    def read_small_files(self, remotes: Sequence[str], max_bytes: int = 4 << 20) -> dict[str, bytes | None]:
        out: dict[str, bytes | None] = {}
        for remote in remotes:
            try:
                with open(remote, "rb") as fh:
                    out[remote] = fh.read(max_bytes + 1)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                out[remote] = None
                continue
            if len(out[remote] or b"") > max_bytes:
                raise RemotePathError(f"local: {remote} is larger than the {max_bytes} bytes a small read allows",
                                      device=self.device.name)
        return out

    def free_bytes(self, remote: str) -> int:
        # The host's own disk_usage; the answer matches df, but a caller's df output is not it.
        path = Path(remote)
        while not path.exists():
            path = path.parent
        return shutil.disk_usage(path).free

    def facts(self) -> dict[str, str]:
        return {"soc_model": self.device.soc_model, "model": os.uname().nodename, "transport": self.kind.name}


def _copy(src: Path, dst: Path, mode: int | None, progress: ProgressFn | None, device: str) -> int:
    dst.parent.mkdir(parents=True, exist_ok=True)
    total = 0
    try:
        with open(src, "rb") as fin, open(dst, "wb") as fout:
            while chunk := fin.read(_CHUNK):
                fout.write(chunk)
                total += len(chunk)
                if progress:
                    progress(len(chunk))
    except OSError as exc:
        if exc.errno == 28:
            raise RemoteNoSpaceError(f"local: no space left writing {dst}; free disk space and retry",
                                     device=device) from None
        raise
    if mode is not None:
        os.chmod(dst, mode)
    return total
