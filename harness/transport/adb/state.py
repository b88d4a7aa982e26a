"""A device as the adb server sees it: its serial (USB or HOST:PORT), its state (device |
offline | unauthorized | authorizing | connecting | absent) read from the server's FAIL
messages, and the error that tells the user what to do about a state."""

from __future__ import annotations

import ipaddress
import re

from harness.errors import DeviceOfflineError, DeviceUnauthorizedError, TransportError
from harness.transport.types import LinkState

_TCP_SERIAL = re.compile(r"^(?P<host>[^\s:]+|\[[0-9a-fA-F:]+\]):(?P<port>\d{1,5})$")


def is_tcp_serial(serial: str) -> bool:
    return _TCP_SERIAL.match(serial) is not None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# The adb server's states (`adb get-state`, its FAIL messages) as a link's state; any other
# answer (none, an error) leaves the link unreachable.
SERVER_STATES: dict[str, LinkState] = {
    "device": LinkState.OK, "unauthorized": LinkState.UNAUTHORIZED, "absent": LinkState.ABSENT,
    **{s: LinkState.OFFLINE for s in ("offline", "authorizing", "connecting", "bootloader", "recovery", "sideload",
                                      "rescue")},
}


def link_state(server_state: str) -> LinkState:
    return SERVER_STATES.get(server_state, LinkState.UNREACHABLE)


def state_from_fail(message: str) -> str:
    low = message.lower()
    for state in ("unauthorized", "offline", "authorizing", "connecting"):
        if state in low:
            return state
    if "not found" in low or "no devices" in low:
        return "absent"
    return "unknown"


def state_error(label: str, serial: str, state: str, device: str = "") -> TransportError:
    """The error for a device that is not in the `device` state; `label` names it in the
    message, `device` is its inventory name."""
    if state == "unauthorized":
        return DeviceUnauthorizedError(
            f"{label}: the device has not authorized this computer. Unlock the phone and accept "
            "the 'Allow USB debugging?' RSA key prompt (tick 'Always allow'); if no prompt appears, use "
            "'Revoke USB debugging authorizations' in Developer options and reconnect. Not retrying.",
            device=device)
    if state == "absent":
        hint = ("`adb connect` got no usable connection" if is_tcp_serial(serial)
                else "check the USB cable and that `adb devices` lists it")
        return DeviceOfflineError(f"{label}: the adb server does not list this device; {hint}", device=device)
    return DeviceOfflineError(f"{label}: the device is `{state}`; wait for it to boot or reconnect it",
                              device=device)


__all__ = ["SERVER_STATES", "is_loopback", "is_tcp_serial", "link_state", "state_error", "state_from_fail"]
