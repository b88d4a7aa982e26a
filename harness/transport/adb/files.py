"""The adb driver's file half: files over our own sync client (sync.py: 64 KiB chunks, like
the adb CLI), one idle sync session kept between calls, sync failures as the transport's errors.
`AdbTransport` (transport.py) is this plus the device link (server connection, state, reconnect), the
shell and the device's facts; it provides the link methods declared abstract here."""

from __future__ import annotations

import hashlib
import posixpath
import select
import stat as stat_mod
import threading
from abc import abstractmethod
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TypeVar

from harness.errors import ConnectionDropped, RemoteNoSpaceError, RemotePathError, TransportError
from harness.transport.adb.host import AdbConnection, AdbError
from harness.transport.adb.sync import SyncClient, SyncFail, SyncProtocolError, tune_socket
from harness.transport.base import ProgressFn, Transport
from harness.transport.types import RemoteStat

LINK_ERRORS = (OSError, EOFError)  # a socket fault or a stream cut short: the link's fault
_SYNC_STALL_S = 120.0
_MAX_PENDING_ACKS = 64  # files sent ahead of their OKAY in push_tree
T = TypeVar("T")


class AdbFileTransport(Transport):
    """Files, stats and small reads over adb's sync protocol (the link: transport.py)."""

    _lock: threading.RLock
    _held_sync: tuple[AdbConnection, SyncClient] | None  # the idle session of an earlier call

    @abstractmethod
    def _open(self, service: str, what: str, timeout: float | None = None, *,
              runs_once: bool = False) -> AdbConnection:
        """A server connection switched to this device and then to `service` (transport.py)."""

    @abstractmethod
    def _dropped(self, what: str, exc: BaseException) -> ConnectionDropped:
        """The error of a link dropped during `what` (transport.py)."""

    @abstractmethod
    def features(self) -> frozenset[str]:
        """The device's adb features (transport.py)."""

    # ---- files --------------------------------------------------------------------------
    def _sync(self, what: str) -> tuple[AdbConnection, SyncClient]:
        """The idle sync session of an earlier call, else a new one: a provisioning run reads
        the manifest, stats files and pushes a batch over one session (each new one costs a
        server connection, a transport switch and a service open). Give it back with
        `_sync_done`; after any error it is closed instead (never reused half-read)."""
        with self._lock:
            held, self._held_sync = self._held_sync, None
        if held is not None:
            # An idle session has nothing to say: anything readable is the server or device
            # having closed it (restart, offline): start a new one instead.
            if not select.select([held[0].conn], [], [], 0)[0]:
                held[1].on_ack = None
                return held
            close_connection(held[0])
        # A stalled transfer (no byte moves for this long) is treated as a dropped link.
        conn = self._open("sync:", what, timeout=_SYNC_STALL_S)
        tune_socket(conn.conn)
        return conn, SyncClient(conn.conn)

    def _sync_done(self, conn: AdbConnection, sync: SyncClient, ok: bool) -> None:
        if ok and not sync.pending:
            with self._lock:
                if self._held_sync is None:
                    self._held_sync = (conn, sync)
                    return
        sync.quit()
        close_connection(conn)

    def _sync_fail(self, message: str, what: str, remote: str) -> TransportError:
        low = message.lower()
        if "no space left" in low or "enospc" in low:
            return RemoteNoSpaceError(f"{self.device.name}: no space left on the device writing {remote} "
                                      f"({message.strip()}); free space under {posixpath.dirname(remote)} "
                                      "(`harness status` shows free disk) and retry", device=self.device.name)
        return RemotePathError(f"{self.device.name}: {what} {remote} failed on the device: {message.strip()}", device=self.device.name)

    def _push_file(self, local: Path, remote: str, mode: int, progress: ProgressFn | None) -> int:
        conn, sync = self._sync(f"push of {local.name}")
        try:
            return sync.send_file(local, remote, mode, int(local.stat().st_mtime), progress)
        except SyncFail as exc:
            raise self._sync_fail(str(exc), "push to", remote) from None
        except LINK_ERRORS as exc:
            if getattr(exc, "filename", None) is not None:
                raise  # reading the local file failed: not the device's fault
            raise self._dropped(f"push of {local} to {remote}", exc) from None
        finally:
            sync.quit()
            close_connection(conn)

    def push_tree(self, local_dir: Path, remote_dir: str, progress: ProgressFn | None = None) -> int:
        """All files over one sync session (see push_many), as `adb push DIR` does."""
        local_dir = Path(local_dir)
        files = sorted(p for p in local_dir.rglob("*") if p.is_file())
        jobs = [(p, posixpath.join(remote_dir, p.relative_to(local_dir).as_posix()), stat_mod.S_IMODE(p.stat().st_mode))
                for p in files]
        if not jobs:
            self.makedirs(remote_dir)
            return 0
        return self.push_many(jobs, progress=progress)

    # push_many hashes what it sends when given on_digest (harness.provision.sync asks).
    hashes_while_pushing = True

    def _push_many(self, jobs: Sequence[tuple[Path, str, int]], *, progress: ProgressFn | None = None,
                   on_done: Callable[[str], None] | None = None,
                   on_digest: Callable[[str, str], None] | None = None) -> int:
        """All files over one sync session, replies collected as they come: no round trip per
        file. After a dropped link the retry resends only the files the device has not
        acknowledged yet; `on_done(remote)` runs as each is acknowledged. `on_digest(remote,
        sha256 hex)` runs as soon as each file's bytes were all sent, hashed from the very chunks
        sent (sync._send_data): the file is read once."""
        jobs = list(jobs)
        features = self.retry.run(f"{self.device.name}: features", self.features)
        if jobs and "fixed_push_mkdir" not in features:
            self.makedirs(*sorted({posixpath.dirname(remote) for _, remote, _ in jobs}))
        done: set[str] = set()

        def acked(remote: str) -> None:
            done.add(remote)
            if on_done is not None:
                on_done(remote)

        def attempt() -> None:
            todo = [j for j in jobs if j[1] not in done]
            if not todo:
                return
            conn, sync = self._sync(f"push of {len(todo)} files")
            sync.on_ack = acked
            remote = todo[0][1]
            ok = False
            try:
                for local, remote, mode in todo:
                    sha = hashlib.sha256() if on_digest is not None else None
                    sync.send_file_nowait(Path(local), remote, mode, int(Path(local).stat().st_mtime), progress, sha)
                    if sha is not None and on_digest is not None:
                        on_digest(remote, sha.hexdigest())
                    sync.wait_acks(keep=_MAX_PENDING_ACKS)
                sync.wait_acks()
                ok = True
            except SyncFail as exc:
                raise self._sync_fail(str(exc), "push to", exc.remote or remote) from None
            except LINK_ERRORS as exc:
                if getattr(exc, "filename", None) is not None:
                    raise
                raise self._dropped(f"push of {len(jobs)} files ({len(done)}/{len(jobs)} files acknowledged)",
                                    exc) from None
            finally:
                self._sync_done(conn, sync, ok)

        self.retry.run(f"push of {len(jobs)} files", attempt)
        return sum(Path(local).stat().st_size for local, _, _ in jobs)

    def _pull_file(self, remote: str, local: Path, progress: ProgressFn | None) -> int:
        conn, sync = self._sync(f"pull of {remote}")
        try:
            return sync.recv_file(remote, local, progress)
        except SyncFail as exc:
            local.unlink(missing_ok=True)
            raise self._sync_fail(str(exc), "pull of", remote) from None
        except SyncProtocolError as exc:
            local.unlink(missing_ok=True)
            raise self._dropped(f"pull of {remote}", exc) from None
        except OSError as exc:
            if getattr(exc, "filename", None) is not None:
                raise  # a local disk problem (open/write of `local`)
            local.unlink(missing_ok=True)
            raise self._dropped(f"pull of {remote}", exc) from None
        finally:
            sync.quit()
            close_connection(conn)

    def stat(self, remote: str) -> RemoteStat | None:
        return self.stat_many([remote])[remote]

    def _sync_session(self, what: str, work: Callable[[SyncClient, frozenset[str]], T]) -> T:
        """`work(sync, features)` in one sync session, with the link-fault mapping and retries."""
        def once() -> T:
            features = self.features()
            conn, sync = self._sync(what)
            ok = False
            try:
                result = work(sync, features)
                ok = True
                return result
            except SyncFail as exc:
                raise self._sync_fail(str(exc), what, exc.remote or "?") from None
            except LINK_ERRORS as exc:
                raise self._dropped(what, exc) from None
            finally:
                self._sync_done(conn, sync, ok)

        return self.retry.run(what, once)

    def stat_many(self, remotes: Sequence[str]) -> dict[str, RemoteStat | None]:
        """All stats over one sync session, pipelined: no device process, about one round trip."""
        what = f"stat of {remotes[0]}" if len(remotes) == 1 else f"stat of {len(remotes)} files"
        return self._sync_session(what, lambda sync, features: dict(zip(remotes, _stats(sync, features, remotes))))

    def read_small_files(self, remotes: Sequence[str], max_bytes: int = 4 << 20) -> dict[str, bytes | None]:
        """Small files (manifests, configs) read over one sync session; None where absent."""
        return self.read_and_stat(remotes, [], max_bytes)[0]

    def read_and_stat(self, reads: Sequence[str], stats: Sequence[str], max_bytes: int = 4 << 20
                      ) -> tuple[dict[str, bytes | None], dict[str, RemoteStat | None]]:
        """One sync session: every stat in one round trip (the files to read too: a RECV of
        an absent file ends adbd's sync session), then each read."""
        def work(sync: SyncClient, features: frozenset[str]) -> tuple[dict[str, bytes | None], dict[str, RemoteStat | None]]:
            got = _stats(sync, features, [*reads, *stats])
            blobs = {r: sync.recv_bytes(r, max_bytes) if st is not None and st.is_file else None
                     for r, st in zip(reads, got)}
            return blobs, dict(zip(stats, got[len(reads):]))

        return self._sync_session(f"read of {len(reads)} small files" + (f" and stat of {len(stats)}" if stats else ""), work)


def _stats(sync: SyncClient, features: frozenset[str], remotes: Sequence[str]) -> list[RemoteStat | None]:
    got = sync.stats(list(remotes), use_v2="stat_v2" in features, use_listing="ls_v2" in features)
    return [None if st is None else RemoteStat(r, st.size, st.mode, st.mtime, st.inode) for r, st in zip(remotes, got)]


def close_connection(conn: AdbConnection) -> None:
    """Close at once (adbutils closed with a half-close and a 10 ms sleep per connection)."""
    with suppress(OSError, AdbError):
        conn.conn.close()
