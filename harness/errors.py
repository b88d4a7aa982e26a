"""Error hierarchy. Every message is complete and meant for a person: it names the file,
key or device involved and says what to do, so front ends print it without a traceback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

EXCERPT_LINES = 20  # of a command's stdout/stderr kept on a device error (its last lines)
EXCERPT_CHARS = 4000
_E = TypeVar("_E", bound="DeviceError")


class HarnessError(Exception):
    """Base of every error the harness reports to a user."""


class InventoryError(HarnessError):
    """devices.yaml (or another inventory file) is unreadable or invalid."""


def excerpt(text: str, lines: int = EXCERPT_LINES, chars: int = EXCERPT_CHARS) -> str:
    """The last `lines` lines of `text`, at most `chars` characters: where a command ended."""
    return "\n".join(text.splitlines()[-lines:])[-chars:]


class DeviceError(HarnessError):
    """An error about one device, carrying what was known where it was raised: the device's
    name, the command's argv, its exit code and the end of what it printed. The message stays
    the person's line; code that must tell cases apart reads these fields (and the class),
    never the message. Empty/None: not known there."""

    def __init__(self, message: str, *, device: str = "", argv: Sequence[str] = (), exit_code: int | None = None,
                 stdout: str = "", stderr: str = "") -> None:
        super().__init__(message)
        self.device = device
        self.argv = tuple(str(a) for a in argv)
        self.exit_code = exit_code
        self.stdout = excerpt(stdout)
        self.stderr = excerpt(stderr)

    def fill(self, *, device: str = "", argv: Sequence[str] = ()) -> None:
        """Add what a caller higher up knows (the transport's argv for a driver's fault)."""
        self.device = self.device or device
        self.argv = self.argv or tuple(str(a) for a in argv)

    @classmethod
    def relayed(cls: type[_E], message: str, fault: DeviceError | None, *, device: str) -> _E:
        """This class's error, under `message`, for a fault another layer caught and reported
        (a runner's record of a lost link): the fault's data when it was kept."""
        if fault is None:
            return cls(message, device=device)
        return cls(message, device=fault.device or device, argv=fault.argv, exit_code=fault.exit_code,
                   stdout=fault.stdout, stderr=fault.stderr)


class TransportError(DeviceError):
    """A device link failed. `retryable` says whether trying again can help."""

    retryable: bool = False


class DeviceOfflineError(TransportError):
    retryable = True


class ConnectionDropped(TransportError):
    retryable = True


class DeviceUnauthorizedError(TransportError):
    retryable = False


class CommandOutcomeUnknown(TransportError):
    """The link died after a command was handed to the device: it may have run (wholly or in
    part), so it is never sent again automatically."""

    retryable = False


class HostKeyError(TransportError):
    retryable = False


class RemoteNoSpaceError(TransportError):
    retryable = False


class RemotePathError(TransportError):
    retryable = False


class UnsendableText(HarnessError):
    """An argument or prompt holds what the device link cannot carry (NUL, lone surrogates)."""


class CommandTimeout(DeviceError):
    """A device command ran past its timeout; the harness killed it."""


class StopRequested(DeviceError):
    """A stop (Ctrl-C, SIGTERM, the lab's stop event) ended device work: a program was not
    started or was killed on the device, a push stopped between chunks (nothing partial at a
    final path). Not a fault of the device or the test."""


class CommandFailed(DeviceError):
    """A device command exited non-zero where the caller required success."""


class ArtifactError(HarnessError):
    """An export folder or runtime bundle is incomplete or does not fit the device."""


class ProvisionError(HarnessError):
    """Pushing artifacts to a device failed."""


class HostWriteError(HarnessError):
    """A file on the host could not be written (disk full, read-only, no permission); the
    file at the final path was left as it was (harness/hostfiles.py)."""


class OutputPathError(HarnessError):
    """An output folder or file the user named cannot be used (a parent is a file, the disk
    is read-only, no permission): a usage error, found before any device is claimed."""
