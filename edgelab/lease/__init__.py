"""Device leases: who may use which device, until when; kept in the database, no daemon (DESIGN §8).

The names below load their modules on first use (PEP 562): ``edgelab.lease.rules`` and
``edgelab.lease.quick`` (the standard-library fast path) must not pull the ORM in with the package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from edgelab.lease.owner import Holder, whoami

if TYPE_CHECKING:
    from edgelab.lease.service import (
        AUTO_TTL_S,
        acquire,
        get_lease,
        holders_by_device,
        kick,
        list_leases,
        physical_key,
        release,
        renew,
        sweep,
    )
    from edgelab.lease.use import Use, begin_use, end_use, held, pin, unpin

_SERVICE = (
    "AUTO_TTL_S",
    "acquire",
    "get_lease",
    "holders_by_device",
    "kick",
    "list_leases",
    "physical_key",
    "release",
    "renew",
    "sweep",
)
_USE = ("Use", "begin_use", "end_use", "held", "pin", "unpin")

__all__ = [
    "AUTO_TTL_S",
    "Holder",
    "Use",
    "acquire",
    "begin_use",
    "end_use",
    "get_lease",
    "held",
    "holders_by_device",
    "kick",
    "list_leases",
    "physical_key",
    "pin",
    "release",
    "renew",
    "sweep",
    "unpin",
    "whoami",
]


def __getattr__(name: str):
    module = "service" if name in _SERVICE else "use" if name in _USE else None
    if module is None:
        raise AttributeError(f"module 'edgelab.lease' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"edgelab.lease.{module}"), name)
    globals()[name] = value
    return value
