"""The lab hosts on the way to a device: SSH jump hosts (``--jump``, ProxyJump) and the SSH host an
``ssh://`` adb server is tunnelled through.

Each of them is an SSH server whose host key must be trusted like a device's own (an impostor jump
host sees every byte of the sessions it carries), so ``edgelab device trust`` walks this chain,
outermost first, and offers the first key not yet trusted. Their keys go to edgelab's known_hosts
only: they belong to a host, not to one inventory row. Nothing secret is kept; keys or the agent
authenticate every hop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from edgelab.transport.base import Endpoint

if TYPE_CHECKING:  # the resolver imports paramiko; a probe of a phone never needs it
    from edgelab.transport.ssh.config import Hop


@dataclass(frozen=True)
class Gateway:
    """One lab host on the way: the name to show, where its key is recorded, and its resolved hop."""

    name: str
    host: str  # known_hosts name: HostKeyAlias, else HostName
    port: int
    hop: Hop


def _chain(hop: Hop) -> list[Hop]:
    """``hop``'s jump hosts, outermost first (each Hop carries the hop before it in ``jump``)."""
    out = []
    j = hop.jump[0] if hop.jump else None
    while j is not None:
        out.append(j)
        j = j.jump[0] if j.jump else None
    return list(reversed(out))


def _gateway(hop: Hop) -> Gateway:
    host, port = (hop.host_key_alias, 22) if hop.host_key_alias else (hop.host, hop.port)
    return Gateway(hop.name, host, port, hop)


def gateways(endpoint: Endpoint, **options) -> list[Gateway]:
    """The SSH hosts that carry the connection to ``endpoint``, outermost first (the device excluded)."""
    from edgelab.transport.adb import tunnel as adb_tunnel
    from edgelab.transport.ssh import config as ssh_config

    if endpoint.kind == "ssh":
        hop = ssh_config.resolve(endpoint, **options)
        return [_gateway(h) for h in _chain(hop)]
    if endpoint.kind == "adb" and adb_tunnel.is_tunnel(endpoint.adb_server):
        hop = ssh_config.resolve(adb_tunnel.parse(endpoint.adb_server or "").endpoint(), **options)
        return [_gateway(h) for h in [*_chain(hop), hop]]
    return []


def fetch_key(gateway: Gateway, timeout: float = 5.0):
    """The host key ``gateway`` presents now (key exchange only, no authentication to it)."""
    from edgelab.transport.ssh.paramiko import connect, pool

    hop = gateway.hop
    sock = pool.open_socket(hop, timeout=timeout)
    try:
        return connect.read_host_key(sock, hop, timeout=timeout)
    finally:
        pool.release_jump(hop)


def trusted(gateway: Gateway, key) -> bool:
    """Whether ``key`` is already trusted for ``gateway``; a CHANGED or revoked key raises HostKeyError."""
    from edgelab.transport.ssh import hostkeys

    hop = gateway.hop
    files = [*hop.known_hosts, *map(str, hostkeys.default_known_hosts_files())]
    entries = hostkeys.lookup(files, gateway.host, gateway.port)
    if not entries:
        return False  # unknown: offer it
    hostkeys.verify(
        gateway.name, hop.host, hop.port, key.pkey(), known_hosts=hop.known_hosts, alias=hop.host_key_alias
    )
    return True
