"""What a labgrid place says: the harness tags naming the run that holds it (host/user,
pid and process start time), whether that run still lives, and snapshots of places and resources."""

from __future__ import annotations

import getpass
import os
import re
import socket
from dataclasses import dataclass

TAG_RUN, TAG_PID, TAG_TOKEN, TAG_PURPOSE = "harness_run", "harness_pid", "harness_token", "harness_purpose"
HARNESS_TAGS = (TAG_RUN, TAG_PID, TAG_TOKEN, TAG_PURPOSE)


def tag_value(text: str) -> str:
    """labgrid tag values are lower-case a-z, 0-9 and _ (labgrid.remote.common.TAG_VAL)."""
    return re.sub(r"[^a-z0-9_]", "_", text.lower())


def identity() -> str:
    """Who this process is to the coordinator: `host/user`, as labgrid-client says it
    (LG_HOSTNAME / LG_USERNAME override, like labgrid's own ClientSession)."""
    return f"{os.environ.get('LG_HOSTNAME', socket.gethostname())}/{os.environ.get('LG_USERNAME', getpass.getuser())}"


def _start_ticks(pid: int) -> str | None:
    """The process's start time (clock ticks since boot): with the pid it names one process,
    not whatever later reuses the pid."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def process_tag(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{pid}_{_start_ticks(pid) or 0}"


def process_alive(tag: str) -> bool:
    """Is the process a `harness_pid` tag names (on this host) still running?"""
    pid_text, _, ticks = tag.partition("_")
    if not pid_text.isdigit():
        return False
    now = _start_ticks(int(pid_text))
    if now is None:
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not os.path.exists("/proc/self/stat")  # /proc exists: the pid is gone
    return ticks in ("", "0") or now == ticks


@dataclass(frozen=True)
class PlaceState:
    """A snapshot of one place as the coordinator published it."""

    name: str
    acquired: str | None  # "host/user"
    tags: dict[str, str]
    comment: str = ""
    reservation: str | None = None

    @property
    def harness_run(self) -> str | None:
        return self.tags.get(TAG_RUN)

    def describe_holder(self) -> str:
        if not self.acquired:
            return "nobody"
        text = self.acquired
        if self.harness_run:
            what = self.tags.get(TAG_PURPOSE, "")
            text += f" (harness {what + ' ' if what else ''}run {self.harness_run}, " \
                    f"pid {self.tags.get(TAG_PID, '?').split('_')[0]})"
        if self.comment:
            text += f" [{self.comment}]"
        return text

    def left_by_dead_run(self, me: str) -> bool:
        """Held by this host+user for a harness run whose process is gone."""
        pid_tag = self.tags.get(TAG_PID)
        return bool(self.acquired == me and self.harness_run and pid_tag and not process_alive(pid_tag))


@dataclass(frozen=True)
class PlaceResource:
    name: str  # the match's rename, else the resource name
    cls: str
    params: dict[str, object]
    available: bool
    path: str  # exporter/group/cls/name
