"""Error hierarchy. Every message is complete and meant for a person: it names the file,
key or device involved and says what to do, so front ends print it without a traceback."""

from __future__ import annotations


class HarnessError(Exception):
    """Base of every error the harness reports to a user."""


class InventoryError(HarnessError):
    """devices.yaml (or another inventory file) is unreadable or invalid."""


class TransportError(HarnessError):
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


class CommandTimeout(HarnessError):
    """A device command ran past its timeout; the harness killed it."""


class CommandFailed(HarnessError):
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
