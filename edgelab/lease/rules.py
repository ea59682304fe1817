"""The lease rules that need no database: a device's physical key (the transport's to say), the
TTL of a workload's own lease, a new lease id. Shared by the ORM service and the standard-library
fast path (``quick``)."""

from __future__ import annotations

import os

from edgelab.errors import ConfigError
from edgelab.transport.address import physical_key as reach_key

AUTO_TTL_S = 60.0  # a workload's own lease; renewed every third of it while the workload runs


def auto_ttl() -> float:
    """The TTL of workloads' own leases: ``EDGELAB_LEASE_TTL`` seconds, default 60."""
    raw = os.environ.get("EDGELAB_LEASE_TTL")
    if not raw:
        return AUTO_TTL_S
    try:
        ttl = float(raw)
    except ValueError:
        raise ConfigError(
            f"EDGELAB_LEASE_TTL={raw!r} is not a number of seconds", remedy="set it to e.g. 60"
        ) from None
    if ttl <= 0:
        raise ConfigError("EDGELAB_LEASE_TTL must be positive", remedy="set it to e.g. 60")
    return ttl


def physical_key(d) -> str:
    """What makes two inventory rows one device (``transport.address.physical_key``); ``d``: the
    ORM's ``Device`` or a quickread row (the same attribute names)."""
    return reach_key(d)


def new_id() -> str:
    return f"L{os.urandom(5).hex()}"  # what secrets.token_hex(5) does, without importing random
