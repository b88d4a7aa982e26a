"""The helper programs a virtual device has in /system/bin besides Android's userland: getprop,
dumpsys battery, df (the virtual partition), vlabstat (the counters) and logcat (a Python
program, logcat.py next to this file, run by the host interpreter with -I -S).

They read the state files the device process writes to ROOT/state (/system/etc/vlab inside).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from virtual_lab.device.layout import COUNTERS_DEVICE_PATH


def helper_programs() -> dict[str, str]:
    """File name in /system/bin -> the program's text."""
    py = os.path.realpath(sys.executable)
    return {
        "getprop": _GETPROP,
        "dumpsys": _DUMPSYS,
        "df": _DF,
        "vlabstat": f"#!/system/bin/sh\n# The virtual device's own counters (adbd side).\nexec cat {COUNTERS_DEVICE_PATH}\n",
        "logcat": f"#!{py} -IS\n" + (Path(__file__).parent / "logcat.py").read_text(encoding="utf-8"),
    }


PASSWD = "root:x:0:0:root:/:/system/bin/sh\nshell:x:2000:2000:shell:/data/local/tmp:/system/bin/sh\n"
GROUP = "root:x:0:\nshell:x:2000:\n"

_GETPROP = """#!/system/bin/sh
# getprop [NAME [DEFAULT]]: this virtual device's properties (toybox-like output).
PROPS=/system/etc/vlab/build.prop
if [ $# -eq 0 ]; then
  exec awk '{ i = index($0, "="); if (i > 1) printf "[%s]: [%s]\\n", substr($0, 1, i - 1), substr($0, i + 1) }' "$PROPS"
fi
exec awk -v k="$1" -v d="$2" '
  { i = index($0, "="); if (i > 1 && substr($0, 1, i - 1) == k) { print substr($0, i + 1); found = 1; exit } }
  END { if (!found) print d }' "$PROPS"
"""

_DUMPSYS = """#!/system/bin/sh
# dumpsys battery (level and temperature come from the virtual device's state).
STATE=/system/etc/vlab/battery.prop
case "$1" in
  battery)
    awk -F= '{ v[$1] = $2 } END {
      print "Current Battery Service state:"
      print "  AC powered: false"; print "  USB powered: true"; print "  Wireless powered: false"
      print "  Max charging current: 500000"; print "  Max charging voltage: 5000000"
      print "  status: 2"; print "  health: 2"; print "  present: true"
      print "  level: " v["level"]; print "  scale: 100"; print "  voltage: 4123"
      print "  temperature: " v["temperature"]; print "  technology: Li-ion" }' "$STATE" ;;
  "" | -l)
    echo "Currently running services:"; echo "  battery" ;;
  *)
    echo "Can't find service: $1" ;;
esac
"""

_DF = """#!/system/bin/sh
# df [-k|-h|-P...] [PATH...]: /data and /sdcard report the virtual partition
# (capacity from the device spec, free capped by the disk-full fault); other paths: real df.
human=0
for a in "$@"; do case "$a" in -h) human=1 ;; esac; done
virtual_row() {
  used=$(du -sb /data /sdcard 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
  awk -F= -v used="$used" -v human="$human" '
    { v[$1] = $2 }
    END {
      cap = v["capacity"] + 0; free = cap - used
      if (v["limit"] != "") { grow = used - v["baseline"]; if (grow < 0) grow = 0
                              lim = v["limit"] - grow; if (lim < free) free = lim }
      if (free < 0) free = 0
      u = cap - free; pct = cap > 0 ? int((u * 100 + cap - 1) / cap) : 0
      if (human) printf "%-16s %9s %9s %9s %4d%% %s\\n", "/dev/block/dm-48", h(cap), h(u), h(free), pct, "/data"
      else printf "%-16s %12d %12d %12d %4d%% %s\\n", "/dev/block/dm-48", int(cap / 1024), int(u / 1024), int(free / 1024), pct, "/data"
    }
    function h(x,  s, i) { split("B K M G T", s, " "); i = 1; while (x >= 1024 && i < 5) { x /= 1024; i++ }
                           return sprintf(i == 1 ? "%d%s" : "%.1f%s", x, s[i]) }' /system/etc/vlab/disk.prop
}
if [ "$human" = 1 ]; then hdr="Size"; else hdr="1K-blocks"; fi
printf "%-16s %12s %12s %12s %5s %s\\n" Filesystem "$hdr" Used Available "Use%" "Mounted on"
paths=0
for a in "$@"; do
  case "$a" in
    -*) continue ;;
    /data|/data/*|/sdcard|/sdcard/*) virtual_row ;;
    *) toybox df -k "$a" 2>&1 | tail -n +2 ;;
  esac
  paths=1
done
[ "$paths" = 1 ] || virtual_row
"""
