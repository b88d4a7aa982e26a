"""Android's own userland for the virtual phone (and for the sync scripts' local tests).

`/system/bin/sh` is mksh (Android's shell), the tools are toybox linked under the names of
Android's applet set, `awk` is the one true awk (Android ships it as /system/bin/awk). They
come from Debian's `mksh`, `toybox` and `original-awk` packages (Makefile `system-deps`).

Android's set is AOSP external/toybox `.config-device` (docs/android-userland.md). Debian's
toybox 0.8.9 lacks some of those applets (`dd`, `diff`, `expr`, `gzip`, `tr`, ...): they are
simply absent here, never filled in from the host's /bin, so a command that runs on the
virtual phone also runs on a real one. Applets Debian's toybox has and Android's does not
(`ascii`, `wget`, ...) are not linked either.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# AOSP external/toybox .config-device: the toys enabled on Android devices (names as the
# applets are called). See docs/android-userland.md.
ANDROID_TOYBOX_APPLETS = frozenset("""
acpi base64 basename bc blkid blockdev cal cat chattr chcon chgrp chmod chown chroot chrt cksum
clear cmp comm cp cpio cut date dd devmem df diff dirname dmesg dos2unix du echo egrep env expand
expr fallocate false fgrep file find flock fmt free freeramdisk fsfreeze fsync getconf getenforce
getfattr getopt grep groups gunzip gzip head hostname hwclock i2cdetect i2cdump i2cget i2cset
iconv id ifconfig inotifyd insmod install ionice iorenice iotop kill killall ln load_policy log
logname losetup ls lsattr lsmod lsof lspci lsusb makedevs md5sum microcom mkdir mkfifo mknod
mkswap mktemp modinfo modprobe more mount mountpoint mv nbd-client nc netcat netstat nice nl
nohup nproc nsenter od partprobe paste patch pgrep pidof ping ping6 pivot_root pkill pmap
printenv printf ps pwd pwdx readelf readlink realpath renice restorecon rev rfkill rm rmdir rmmod
runcon sed sendevent seq setenforce setfattr setprop setsid sha1sum sha224sum sha256sum sha384sum
sha512sum sleep sort split start stat stop strings stty swapoff swapon sync sysctl tac tail tar
taskset tee test time timeout top touch traceroute true truncate tr tty tunctl ulimit umount
uname uniq unix2dos unlink unshare uptime usleep uudecode uuencode uuidgen vconfig vi vmstat watch
wc which whoami xargs xxd yes zcat [
""".split())

# Debian package that brings each host program.
PACKAGES = {"mksh": "mksh", "toybox": "toybox", "original-awk": "original-awk"}


class UserlandError(RuntimeError):
    """A host program the Android userland is made of is missing (message says what to install)."""


@dataclass(frozen=True)
class Userland:
    mksh: str
    toybox: str
    awk: str
    applets: tuple[str, ...]  # Android's applets this toybox has: linked
    missing: tuple[str, ...]  # Android's applets this toybox lacks: absent on the virtual phone

    def links(self) -> dict[str, str]:
        """Name in /system/bin -> absolute host path it points at (the sandbox binds /usr)."""
        out = {name: self.toybox for name in self.applets}
        out.update({"toybox": self.toybox, "sh": self.mksh, "awk": self.awk})
        return out

    def populate(self, bin_dir: Path, *, keep: frozenset[str] = frozenset()) -> None:
        """Make `bin_dir` hold exactly Android's programs as symlinks; names in `keep` (the
        virtual device's own helpers such as getprop and df) are left alone."""
        bin_dir.mkdir(parents=True, exist_ok=True)
        links = {k: v for k, v in self.links().items() if k not in keep}
        for entry in bin_dir.iterdir():
            if entry.is_symlink() and entry.name not in links and entry.name not in keep:
                entry.unlink()  # e.g. an older tree's sh -> /bin/sh
        for name, target in links.items():
            path = bin_dir / name
            if path.is_symlink() and os.readlink(path) == target:
                continue
            if path.is_symlink() or path.exists():
                path.unlink()
            path.symlink_to(target)


def find_userland() -> Userland:
    found: dict[str, str] = {}
    for prog, pkg in PACKAGES.items():
        path = shutil.which(prog, path=os.defpath + ":/usr/bin:/bin")
        if path is None:
            raise UserlandError(f"the virtual phone's userland needs `{prog}` (Debian package `{pkg}`); "
                                f"run `make system-deps` or `apt-get install {' '.join(PACKAGES.values())}`")
        found[prog] = os.path.realpath(path)
    have = set(_toybox_applets(found["toybox"]))
    return Userland(mksh=found["mksh"], toybox=found["toybox"], awk=found["original-awk"],
                    applets=tuple(sorted(ANDROID_TOYBOX_APPLETS & have)),
                    missing=tuple(sorted(ANDROID_TOYBOX_APPLETS - have)))


def _toybox_applets(toybox: str) -> list[str]:
    # `toybox` without arguments lists its applets, blank-separated.
    out = subprocess.run([toybox], capture_output=True, text=True, timeout=30, check=False).stdout
    return out.split()
