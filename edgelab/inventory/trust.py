"""Trusting an SSH device's host key: fetch it, let the operator compare, then record it twice.

The fingerprint goes on the device row (so any lab host sharing the database knows it)
and the key into edgelab's own known_hosts (so plain paramiko/OpenSSH checks agree).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from edgelab.config import known_hosts_path
from edgelab.errors import ConfigError, HostKeyError
from edgelab.store.db import session_scope
from edgelab.store.devices import get_device, record_host_key
from edgelab.store.models import Device


@dataclass(frozen=True)
class TrustOffer:
    """The key a device presents now, next to what the inventory already trusts."""

    name: str
    host: str
    port: int
    key_type: str
    fingerprint: str
    recorded_fingerprint: str | None
    key: object  # edgelab.transport.hostkeys.HostKey

    @property
    def already_trusted(self) -> bool:
        return self.recorded_fingerprint is not None and _same(self.recorded_fingerprint, self.fingerprint)

    @property
    def changed(self) -> bool:
        return self.recorded_fingerprint is not None and not self.already_trusted


def _same(a: str, b: str) -> bool:
    from edgelab.transport.hostkeys import normalize_fingerprint

    return normalize_fingerprint(a) == normalize_fingerprint(b)


def _ssh_device(engine: Engine, name: str) -> Device:
    with session_scope(engine, write=False) as s:
        device = get_device(s, name)
    if device.transport != "ssh":
        raise ConfigError(
            f"{name} is reached over {device.transport}; only SSH devices have host keys",
            remedy="adb devices are trusted by accepting the RSA prompt on the device",
        )
    return device


def fetch_offer(engine: Engine, name: str, timeout: float = 5.0) -> TrustOffer:
    """Connect (no auth) and read the host key the device presents now."""
    from edgelab.transport import ssh

    device = _ssh_device(engine, name)
    endpoint = device.endpoint()
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
    from edgelab.transport import hostkeys

    if offer.changed and not replace:
        raise HostKeyError(
            f"{offer.name} presents {offer.fingerprint}, but {offer.recorded_fingerprint} is recorded: "
            "the host key CHANGED",
            remedy=f"verify the new key on the device, then run `edgelab device trust {offer.name} --replace`",
        )
    hostkeys.add_known_host(known_hosts_path(), offer.host, offer.port, offer.key, replace=replace)
    with session_scope(engine) as s:
        return record_host_key(s, offer.name, offer.fingerprint, offer.key_type)
