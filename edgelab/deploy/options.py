"""How deploy, stop and the follower reach a device: transport options and the stop grace, one connect."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from edgelab.errors import Refusal, RefusalCode, TransportError
from edgelab.transport import Transport, open_transport


@dataclass
class Options:
    """Transport options (ssh_config, timeout), the start-up grace for stops, a caller's cancel."""

    transport: dict[str, Any] = field(default_factory=dict)
    stop_grace_s: int = 5
    ready_timeout_s: float | None = None  # overrides the profile-derived timeout
    cancel: threading.Event | None = None  # set by the caller (a playbook's Ctrl-C): a starting deploy aborts
    ephemeral: bool = False  # lives only as long as the process that deployed it (a playbook's): reaped after
    play: dict[str, Any] | None = None  # the playbook, job and step that started it (its runs' provenance)


def connect(endpoint, opts: Options) -> Transport:
    """A transport to the device; each knob applies where it means something (``options_for``)."""
    return open_transport(endpoint, **opts.transport)


def unreachable(e: TransportError, device: str) -> Refusal:
    """A device that cannot be reached refuses the run (``device_unreachable``) with the transport's remedy."""
    return Refusal(
        RefusalCode.DEVICE_UNREACHABLE,
        str(e),
        device=device,
        remedy=e.remedy or f"run `edgelab device check {device}`",
    )


def connect_device(endpoint, opts: Options, device: str) -> Transport:
    """``connect``, or the Refusal :func:`unreachable` says: how deploy and bench both open a device."""
    try:
        return connect(endpoint, opts)
    except TransportError as e:
        raise unreachable(e, device) from e
