"""Messages between workers, widgets and screens: data arrives as a message, never by a shared variable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass
class FleetLoaded(Message):
    """A fresh read of the fleet (list of data.FleetRow); ``seq`` orders reads begun earlier or later."""

    rows: list
    seq: int = 0


@dataclass
class DeviceLoaded(Message):
    """A fresh read of one device page (data.DeviceDetail), or the error that stopped it."""

    detail: Any
    error: str | None = None


@dataclass
class ActionDone(Message):
    """A probe, check or stop finished in a worker: what, on which device, and how it went."""

    action: str
    target: str
    ok: bool
    text: str


@dataclass
class DeviceChosen(Message):
    """The operator picked a device (enter in the fleet table)."""

    name: str


@dataclass
class RunLoaded(Message):
    """A fresh read of one run (edgelab.views.run.RunView)."""

    view: Any


@dataclass
class HostKeyFetched(Message):
    """The host key a device (or a lab host on the way to it) presents: an inventory.trust.TrustOffer,
    or why it could not be read."""

    target: str
    offer: Any
    error: str | None = None
