"""Trusting an SSH device's host key: fetch it, let the operator compare, then record it twice.

The fingerprint goes on the device row (so any lab host sharing the database knows it)
and the key into edgelab's own known_hosts (so plain paramiko/OpenSSH checks agree).

The lab hosts on the way come first (a jump host, the SSH host of an ``ssh://`` adb server):
while one of them is untrusted, its key is what is offered, and trusting it records it in
known_hosts only, since it belongs to that host rather than to the device's row.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from edgelab.config import known_hosts_path
from edgelab.errors import ConfigError, HostKeyError
from edgelab.store.db import session_scope
from edgelab.store.devices import get_device, record_host_key
from edgelab.store.models import Device
from edgelab.transport.address import has_host_keys, host_keys_on_the_way


@dataclass(frozen=True)
class TrustOffer:
    """The key a device presents now, next to what the inventory already trusts."""

    name: str
    host: str
    port: int
    key_type: str
    fingerprint: str
    recorded_fingerprint: str | None
    key: object  # edgelab.transport.ssh.hostkeys.HostKey
    via: str | None = None  # the lab host (jump host, adb tunnel host) this key belongs to, not the device

    @property
    def already_trusted(self) -> bool:
        return self.recorded_fingerprint is not None and _same(self.recorded_fingerprint, self.fingerprint)

    @property
    def changed(self) -> bool:
        return self.recorded_fingerprint is not None and not self.already_trusted


def _same(a: str, b: str) -> bool:
    from edgelab.transport.ssh.hostkeys import normalize_fingerprint

    return normalize_fingerprint(a) == normalize_fingerprint(b)


def _device(engine: Engine, name: str) -> Device:
    with session_scope(engine, write=False) as s:
        return get_device(s, name)


def fetch_offer(engine: Engine, name: str, timeout: float = 5.0) -> TrustOffer:
    """Connect (no auth) and read the host key to trust next: the first untrusted lab host on the way
    to the device, else the device's own."""
    from edgelab.transport import jump

    device = _device(engine, name)
    endpoint = device.endpoint()
    if not host_keys_on_the_way(device.transport):
        raise ConfigError(
            f"{name} is reached over {device.transport}; only SSH hosts have host keys",
            remedy="nothing to trust",
        )
    for gw in jump.gateways(endpoint):
        key = jump.fetch_key(gw, timeout=timeout)
        if not jump.trusted(gw, key):
            return TrustOffer(
                name=name,
                host=gw.host,
                port=gw.port,
                key_type=key.key_type,
                fingerprint=key.fingerprint,
                recorded_fingerprint=None,
                key=key,
                via=gw.name,
            )
    if not has_host_keys(device.transport):
        raise ConfigError(
            f"{name} is reached over {device.transport}; only SSH devices have host keys"
            + (
                " (its lab host's key is trusted)"
                if endpoint.adb_server and "://" in endpoint.adb_server
                else ""
            ),
            remedy="adb devices are trusted by accepting the RSA prompt on the device",
        )
    from edgelab.transport import ssh

    hop = ssh.resolve_endpoint(endpoint)
    key = ssh.fetch_host_key(endpoint, timeout=timeout)
    host, port = (hop.host_key_alias, 22) if hop.host_key_alias else (hop.host, hop.port)
    return TrustOffer(
        name=name,
        host=host,
        port=port,
        key_type=key.key_type,
        fingerprint=key.fingerprint,
        recorded_fingerprint=device.host_key_fingerprint,
        key=key,
    )


def accept_offer(engine: Engine, offer: TrustOffer, *, replace: bool = False) -> Device:
    """Record the offered key; a different key already recorded needs ``replace``."""
    from edgelab.transport.ssh import hostkeys

    if offer.changed and not replace:
        raise HostKeyError(
            f"{offer.name} presents {offer.fingerprint}, but {offer.recorded_fingerprint} is recorded: "
            "the host key CHANGED",
            remedy=f"verify the new key on the device, then run `edgelab device trust {offer.name} --replace`",
        )
    hostkeys.add_known_host(known_hosts_path(), offer.host, offer.port, offer.key, replace=replace)
    with session_scope(engine) as s:
        if offer.via is not None:  # a lab host's key: known_hosts only, the device row keeps its own
            return get_device(s, offer.name)
        return record_host_key(s, offer.name, offer.fingerprint, offer.key_type)
