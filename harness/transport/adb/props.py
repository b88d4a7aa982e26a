"""Android system properties (`getprop` output) and the ones the adb transport reports as
facts."""

from __future__ import annotations

import re

_PROP_LINE = re.compile(r"^\[(?P<key>[^\]]+)\]: \[(?P<value>.*)\]$")
FACT_PROPS = {
    "model": "ro.product.model",
    "product": "ro.product.name",
    "device": "ro.product.device",
    "manufacturer": "ro.product.manufacturer",
    "reported_soc_model": "ro.soc.model",
    "soc_manufacturer": "ro.soc.manufacturer",
    "board_platform": "ro.board.platform",
    "android_release": "ro.build.version.release",
    "sdk": "ro.build.version.sdk",
    "abi": "ro.product.cpu.abi",
    "serialno": "ro.serialno",
    "hardware": "ro.hardware",
    "bootloader": "ro.boot.bootloader",
    "hardware_revision": "ro.boot.hardware.revision",
    "boot_completed": "sys.boot_completed",
}


def parse_getprop(text: str) -> dict[str, str]:
    """`[key]: [value]` lines of `getprop` -> {key: value}."""
    props = {}
    for line in text.splitlines():
        m = _PROP_LINE.match(line.strip())
        if m:
            props[m.group("key")] = m.group("value")
    return props


__all__ = ["FACT_PROPS", "parse_getprop"]
