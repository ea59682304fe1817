"""The lease rules that need no database: a device's physical key, the TTL of a workload's own
lease, a new lease id. Shared by the ORM service and the standard-library fast path (``quick``)."""

from __future__ import annotations

import os
import secrets

from edgelab.errors import ConfigError

AUTO_TTL_S = 60.0  # a workload's own lease; renewed every third of it while the workload runs
DEFAULT_ADB_SERVER = "127.0.0.1:5037"


def auto_ttl() -> float:
    """The TTL of workloads' own leases: ``EDGELAB_LEASE_TTL`` seconds, default 60."""
    raw = os.environ.get("EDGELAB_LEASE_TTL")
    if not raw:
        return AUTO_TTL_S
    try:
        ttl = float(raw)
    except ValueError:
        raise ConfigError(f"EDGELAB_LEASE_TTL={raw!r} is not a number of seconds",
                          remedy="set it to e.g. 60") from None
    if ttl <= 0:
        raise ConfigError("EDGELAB_LEASE_TTL must be positive", remedy="set it to e.g. 60")
    return ttl


def _local_host(host: str) -> str:
    h = host.strip().lower()
    return "127.0.0.1" if h in ("localhost", "::1", "[::1]", "127.0.0.1") else h


def physical_key(d) -> str:
    """What makes two inventory rows one device: the adb serial on its server, the ssh host and port.

    ``d``: a device row (the ORM's ``Device`` or a quickread row: the same attribute names).
    """
    if d.transport == "adb":
        server = d.adb_server or DEFAULT_ADB_SERVER
        host, _, port = server.rpartition(":")
        return f"adb:{_local_host(host or '127.0.0.1')}:{port or '5037'}/{d.adb_serial}"
    if d.transport == "ssh":
        via = f"{d.ssh_jump.lower()}>" if d.ssh_jump else ""
        return f"ssh:{via}{_local_host(d.ssh_host or '')}:{d.ssh_port or 22}"
    return f"{d.transport}:{d.name}"


def new_id() -> str:
    return f"L{secrets.token_hex(5)}"
