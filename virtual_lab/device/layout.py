"""Where things are on a virtual device: its Android paths, the folders of its root on the host,
and which of them the sandbox mounts where (docs/android-userland.md for the real device's)."""

from __future__ import annotations

from dataclasses import dataclass

LOGCAT_DEVICE_PATH = "/data/misc/logcat.log"
COUNTERS_DEVICE_PATH = "/system/etc/vlab/counters.json"
STATE_DEVICE_DIR = "/system/etc/vlab"
SHELL_PATH = "/system/bin:/system/xbin:/vendor/bin"  # as Android's adbd sets it: no host /bin
SHELL_UID = 2000  # AID_SHELL: adbd runs commands as the shell user, not root


@dataclass(frozen=True)
class Mount:
    device: str   # Android path
    sub: str      # folder under the device root
    writable: bool


# Longest device prefix first: /system/etc/vlab sits inside /system.
MOUNTS: tuple[Mount, ...] = (
    Mount("/system/etc/vlab", "state", False),
    Mount("/data", "data", True),
    Mount("/vendor", "vendor", False),
    Mount("/system", "system", False),
    Mount("/sdcard", "sdcard", True),
)

TREE = ("data/local/tmp", "data/misc", "vendor/lib64", "vendor/lib/rfsa/adsp", "vendor/bin",
        "vendor/etc", "system/bin", "system/xbin", "system/lib64", "system/etc/vlab", "sdcard/Download", "state")
