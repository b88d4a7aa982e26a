"""The device's Android tree on the host (`Sandbox`): creating it, mapping and resolving device
paths, and running a shell inside it.

Shell commands run as `/system/bin/sh -c CMD` (mksh) under bubblewrap as the shell user (uid
2000, in a user namespace), PATH /system/bin:/system/xbin:/vendor/bin only, with those folders
bound at their Android paths, all capabilities dropped, and the host pid namespace shared (so
`$!` and a later `kill PID` work). Host /usr, /lib* and /etc stay mounted read-only only so
that the dynamic loader, libc and the Python interpreter (the virtual runtimes, a real glibc
llm_demo) are reachable by absolute path; no host folder is on PATH.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from virtual_lab.device.helpers import GROUP, PASSWD, helper_programs
from virtual_lab.device.layout import MOUNTS, SHELL_PATH, SHELL_UID, TREE, Mount
from virtual_lab.device.spec import DeviceError
from virtual_lab.userland import find_userland


@dataclass(frozen=True)
class Resolved:
    """A device path after symlinks were followed inside the sandbox."""

    device: str
    host: Path | None      # None: nothing of the sandbox is there
    writable: bool
    is_root: bool = False  # "/" (a virtual directory listing the mounts)


class Sandbox:
    """The device's Android tree on the host, and how to run a shell inside it."""

    def __init__(self, root: Path, extra_ro_binds: Sequence[Path] = ()) -> None:
        self.root = Path(root).resolve()
        self.state_dir = self.root / "state"
        self.extra_ro_binds = tuple(Path(p) for p in extra_ro_binds)

    # ---- tree ---------------------------------------------------------------------------
    def create(self) -> None:
        for sub in TREE:
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "data/local/tmp").chmod(0o771)
        lib = self.root / "vendor/lib64/libcdsprpc.so"
        if not lib.exists():  # a real device has the FastRPC client library here
            lib.write_bytes(b"\x7fELF placeholder: virtual lab libcdsprpc.so\n")
        helpers = helper_programs()
        find_userland().populate(self.root / "system/bin", keep=frozenset(helpers))
        for name, text in helpers.items():
            path = self.root / "system/bin" / name
            if path.is_symlink():
                path.unlink()
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
            path.chmod(0o755)
        # bionic knows the shell user by itself; glibc programs (toybox id, ls -l) read these.
        for name, text in (("passwd", PASSWD), ("group", GROUP)):
            path = self.root / "system/etc" / name
            if not path.exists() or path.read_text() != text:
                path.write_text(text)

    def host_path(self, device_path: str) -> Path:
        """Host path of a device path (lexically; symlinks are not followed)."""
        if not device_path.startswith("/"):
            raise DeviceError(f"device path {device_path!r} must be absolute")
        norm = os.path.normpath(device_path)
        host = self._map(norm)
        if host is None:
            raise DeviceError(f"device path {device_path!r} is outside the sandbox "
                              f"(mounts: {', '.join(m.device for m in MOUNTS)})")
        return host

    def _mount_of(self, device_path: str) -> Mount | None:
        for m in MOUNTS:
            if device_path == m.device or device_path.startswith(m.device + "/"):
                return m
        return None

    def _map(self, device_path: str) -> Path | None:
        m = self._mount_of(device_path)
        if m is None:
            return None
        rest = device_path[len(m.device):].lstrip("/")
        return self.root / m.sub / rest if rest else self.root / m.sub

    def resolve(self, path: str, follow_last: bool = True) -> Resolved:
        """Follow symlinks as the device would see them, never leaving the sandbox view.

        A link to /etc/passwd resolves to the device path /etc/passwd, which maps to nothing
        (host /etc is not part of the sandbox for file transfers).
        """
        todo = [c for c in path.split("/") if c][::-1]
        out: list[str] = []
        hops = 0
        while todo:
            comp = todo.pop()
            if comp == ".":
                continue
            if comp == "..":
                if out:
                    out.pop()
                continue
            out.append(comp)
            if not todo and not follow_last:
                break
            host = self._map("/" + "/".join(out))
            if host is None:
                continue
            try:
                st = os.lstat(host)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                hops += 1
                if hops > 40:  # ELOOP, as the kernel would say
                    return Resolved("/" + "/".join(out), None, False)
                target = os.readlink(host)
                out.pop()
                if target.startswith("/"):
                    out = []
                todo.extend([c for c in target.split("/") if c][::-1])
        device = "/" + "/".join(out)
        if device == "/":
            return Resolved("/", None, False, is_root=True)
        m = self._mount_of(device)
        return Resolved(device, self._map(device), bool(m and m.writable))

    @staticmethod
    def root_entries() -> list[str]:
        return sorted({m.device.split("/")[1] for m in MOUNTS})

    # ---- shell --------------------------------------------------------------------------
    def bwrap_argv(self, command: str) -> list[str]:
        # A device's adbd starts each shell with every signal at its default action; a lab host
        # started under `nohup` (or any ignoring parent) would hand its SIG_IGN for SIGHUP down the
        # exec chain, and a client's hang-up would no longer end the command (GNU env >= 8.31).
        argv = ["env", "--default-signal", "bwrap", "--unshare-user", "--uid", str(SHELL_UID), "--gid", str(SHELL_UID),
                "--cap-drop", "ALL", "--unshare-uts", "--hostname", "localhost", "--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                argv += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                argv += ["--ro-bind", top, top]
        argv += ["--ro-bind", "/etc", "/etc", "--ro-bind", str(self.root / "system/etc/passwd"), "/etc/passwd",
                 "--ro-bind", str(self.root / "system/etc/group"), "/etc/group",
                 "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        # After the /tmp tmpfs: a checkout or interpreter under /tmp must stay visible.
        for extra in self._python_dirs() + [str(p.resolve()) for p in self.extra_ro_binds]:
            argv += ["--ro-bind", extra, extra]
        for target, link in self._python_links():
            argv += ["--ro-bind", target, link]
        for m in sorted(MOUNTS, key=lambda m: len(m.device)):  # parents before nested mounts
            argv += ["--bind" if m.writable else "--ro-bind", str(self.root / m.sub), m.device]
        argv += ["--chdir", "/", "--clearenv"]
        env = {"PATH": SHELL_PATH, "HOME": "/", "TMPDIR": "/data/local/tmp", "ANDROID_DATA": "/data",
               "ANDROID_ROOT": "/system", "EXTERNAL_STORAGE": "/sdcard", "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1", "HOSTNAME": "localhost"}
        for k, v in env.items():
            argv += ["--setenv", k, v]
        return argv + ["/system/bin/sh", "-c", command]

    @staticmethod
    def _python_dirs() -> list[str]:
        # The virtual runtime's scripts run with #!sys.executable: make that interpreter and
        # its libraries visible (read-only). Folders under /usr are bound already.
        dirs: list[str] = []
        candidates = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))]
        try:
            import site
            candidates += site.getsitepackages()
        except AttributeError:
            pass
        for d in candidates:
            d = os.path.realpath(d)
            if not os.path.isdir(d) or d == "/usr" or d.startswith("/usr/") or d in ("/", "/etc"):
                continue
            if any(d == k or d.startswith(k + "/") for k in dirs):
                continue
            dirs = [k for k in dirs if not k.startswith(d + "/")] + [d]
        return dirs

    @staticmethod
    def _python_links() -> list[tuple[str, str]]:
        # A venv reached through a symlinked path: the runtime's `#!` names the link's path (the
        # link, not its target, finds the venv's site-packages), and only targets are bound above.
        # Bind each target again at the linked path so that path means the same inside.
        out: list[tuple[str, str]] = []
        for d in (sys.prefix, os.path.dirname(os.path.abspath(sys.executable))):
            link, target = os.path.abspath(d), os.path.realpath(d)
            if link == target or not os.path.isdir(target) or link == "/usr" or link.startswith(("/usr/", "/etc/")):
                continue
            if any(link == k or link.startswith(k + "/") for _, k in out):
                continue
            out.append((target, link))
        return out

    def popen(self, command: str, *, merge_stderr: bool) -> subprocess.Popen:
        # A new session: the whole command (and what it spawns without setsid) shares one
        # process group that can be hung up when the client goes away.
        return subprocess.Popen(
            self.bwrap_argv(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            cwd=str(self.root), start_new_session=True, bufsize=0)

    def run(self, command: str, timeout: float | None = 60, input: bytes | None = None) -> subprocess.CompletedProcess:
        """Run a shell command in the sandbox directly (no adb): for setup and tests."""
        proc = self.popen(command, merge_stderr=False)
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise
        return subprocess.CompletedProcess(proc.args, exit_code(proc.returncode), out, err)


def exit_code(returncode: int) -> int:
    """Popen's -N (killed by signal N) as a shell reports it: 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def atomic_write(path: Path, text: str) -> None:
    """Replace a state file whole, so a reader in the sandbox never sees half of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
