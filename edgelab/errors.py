"""Errors the domain layer raises; the CLI turns each into one line plus a remedy."""

from __future__ import annotations


class EdgelabError(Exception):
    """Base class: ``str(err)`` is the one-line message, ``remedy`` what to do next."""

    remedy: str | None = None
    exit_code: int | None = None  # the CLI's exit code when the class fixes it (2: bad input, a usage error)

    def __init__(self, message: str, *, remedy: str | None = None):
        super().__init__(message)
        if remedy is not None:
            self.remedy = remedy


class ConfigError(EdgelabError):
    """Bad input from the operator: a name, an address, a URL."""


class NotFound(EdgelabError):
    """A device, run or artifact that the database does not hold."""


class Interrupted(EdgelabError):
    """The operator stopped the operation (Ctrl-C): what was done is kept, what was not is said."""

    exit_code = 130


class TransportError(EdgelabError):
    """A device could not be reached or a remote operation failed at the transport level."""


class HostKeyError(TransportError):
    """An SSH host key that is unknown or changed: refused until the operator trusts it."""


class DeviceStateError(TransportError):
    """An ADB device that is offline, unauthorized or otherwise not ready."""


class RemoteTimeout(TransportError):
    """A remote command ran past its timeout and was killed."""


class DeviceNotAnswering(TransportError):
    """A device that is listed (its server or sshd accepted us) but never answers: frozen, hung or
    overloaded. Raised when a transport call's timeout ran out before the device said anything."""
