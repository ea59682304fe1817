"""One typed options record per transport, built in one place from the endpoint and the caller's knobs.

Callers say what they want (a connect timeout, an ssh_config file, a known_hosts file) without
knowing how the device is reached; ``options_for`` keeps the knobs that apply to the endpoint's
transport and drops the others, so no layer above branches on the endpoint's kind to build them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from edgelab.errors import ConfigError
from edgelab.transport.base import Endpoint, TransportOptions

__all__ = ["OPTIONS", "ADBOptions", "LocalOptions", "SSHOptions", "TransportOptions", "options_for"]


@dataclass(frozen=True)
class SSHOptions(TransportOptions):
    """SSH (Linux, WSL and Windows hosts alike): OpenSSH config and known_hosts files to read."""

    ssh_config: str | os.PathLike[str] | None = None
    known_hosts: Path | None = None


@dataclass(frozen=True)
class ADBOptions(TransportOptions):
    """ADB: the server and serial come from the endpoint; only the timeout is a knob."""


@dataclass(frozen=True)
class LocalOptions(TransportOptions):
    """The lab host itself: nothing to connect, so no knob applies (a timeout is dropped)."""

    def kwargs(self) -> dict[str, Any]:
        return {}


OPTIONS: dict[str, type[TransportOptions]] = {"ssh": SSHOptions, "adb": ADBOptions, "local": LocalOptions}


def options_for(endpoint: Endpoint, **knobs: Any) -> TransportOptions:
    """The options record for ``endpoint``'s transport from ``knobs`` (None values count as unset).

    A knob no transport knows is a ConfigError (a typo must not be dropped silently); a knob
    another transport knows is dropped here (``ssh_config`` means nothing to a phone)."""
    try:
        cls = OPTIONS[endpoint.kind]
    except KeyError:
        raise ConfigError(
            f"unknown transport kind {endpoint.kind!r}", remedy="use ssh, adb or local"
        ) from None
    known = {f.name for opt in OPTIONS.values() for f in fields(opt)}
    unknown = sorted(set(knobs) - known)
    if unknown:
        raise ConfigError(
            f"unknown transport option(s) {', '.join(unknown)}", remedy=f"use {', '.join(sorted(known))}"
        )
    mine = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in knobs.items() if k in mine and v is not None})
