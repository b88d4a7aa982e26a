"""One emulated Android device: sandbox tree, properties, shell, disk, counters, adbd.

Layout of a device root folder (host side)::

    ROOT/data/local/tmp  ROOT/data/misc      -> /data      (read-write)
    ROOT/vendor/lib64    ROOT/vendor/lib/rfsa/adsp -> /vendor (read-only)
    ROOT/system/bin      Android's userland (virtual_lab.userland: sh is mksh, toybox's Android
                         applets, awk) and the helpers getprop, dumpsys, df, logcat, vlabstat
                                             -> /system (read-only)
    ROOT/sdcard                              -> /sdcard    (read-write)
    ROOT/state           (outside the sandbox, written by the device process only)
                                             -> /system/etc/vlab (read-only inside)

`ROOT/state` holds `build.prop` (getprop), `battery.prop` (dumpsys battery), `disk.prop`
(virtual capacity for df), `device.json` (the spec, e.g. htp_arch for the virtual runtime),
`counters.json` (the device's own counters, also printed by `vlabstat` in the device
shell) and `faults.json` (the fault control file, see `virtual_lab.faults`).

Logcat: the virtual runtime appends lines `<epoch> <pid> <tag> <level> <message>` (level one
of V D I W E F) to `/data/misc/logcat.log`; the `logcat` helper reads it (`-d`, `-c`,
`-s TAG`, `TAG:LEVEL` filters, `-v brief|threadtime|time`, `-t N`).

One job per module:

    virtual_device.py  VirtualDevice: lifecycle, adbd, state files, battery, logcat lines
    spec.py            VirtualDeviceSpec (what the device says about itself), DeviceError
    layout.py          device paths, the root's folders and the sandbox's mounts
    sandbox.py         Sandbox: the tree, device path mapping and resolving, the bubblewrap shell
    disk.py            DiskModel: the /data partition and the disk-full fault
    counters.py        DeviceCounters: what adbd served (vlabstat)
    helpers.py         the /system/bin helper programs' text (getprop, dumpsys, df, vlabstat)
    logcat.py          the /system/bin/logcat program (read as text by helpers.py, never imported)

This package re-exports the public names of those modules, so `from virtual_lab.device import
VirtualDevice, VirtualDeviceSpec` keeps working; new code may import from the module that holds
the name.
"""

from virtual_lab.device.counters import DeviceCounters
from virtual_lab.device.disk import DiskModel
from virtual_lab.device.layout import (
    COUNTERS_DEVICE_PATH,
    LOGCAT_DEVICE_PATH,
    MOUNTS,
    SHELL_PATH,
    SHELL_UID,
    STATE_DEVICE_DIR,
)
from virtual_lab.device.sandbox import Resolved, Sandbox, exit_code
from virtual_lab.device.spec import DeviceError, GiB, VirtualDeviceSpec
from virtual_lab.device.virtual_device import VirtualDevice

__all__ = [
    "COUNTERS_DEVICE_PATH", "LOGCAT_DEVICE_PATH", "MOUNTS", "SHELL_PATH", "SHELL_UID", "STATE_DEVICE_DIR",
    "GiB", "DeviceCounters", "DeviceError", "DiskModel", "Resolved", "Sandbox", "VirtualDevice",
    "VirtualDeviceSpec", "exit_code",
]
