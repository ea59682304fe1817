"""How deploy, stop and the follower reach a device: transport options and the stop grace, one connect."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgelab.transport import Transport, open_transport


@dataclass
class Options:
    """Transport options (ssh_config, timeout) and the start-up grace for stops."""

    transport: dict[str, Any] = field(default_factory=dict)
    stop_grace_s: int = 5
    ready_timeout_s: float | None = None  # overrides the profile-derived timeout


def connect(endpoint, opts: Options) -> Transport:
    """A transport to the device; each knob applies where it means something (``options_for``)."""
    return open_transport(endpoint, **opts.transport)
