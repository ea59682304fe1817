"""SSH host-key trust: fingerprints, known_hosts files, and the refusal rules.

An unknown key is refused until the operator trusts it (``edgelab device trust``);
a key that differs from a recorded one is refused loudly, because that is what
a man in the middle looks like. Only public keys and fingerprints live here; reaching a
server to read its key is ``transport.ssh`` (``fetch_host_key``), which imports this module.
Reading known_hosts lines is ``transport.ssh.known_hosts`` (standard library only, so a path that
runs the system ssh can find the trusted keys without paramiko); ``lookup`` loads its keys.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import paramiko

from edgelab.errors import HostKeyError
from edgelab.transport.ssh import known_hosts

# Host-key algorithm names a key of each type may be negotiated under.
_ALGOS_FOR_TYPE = {"ssh-rsa": ("rsa-sha2-512", "rsa-sha2-256")}


@dataclass(frozen=True)
class HostKey:
    """A server's public host key: what ``device trust`` shows and records."""

    key_type: str  # "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa"
    fingerprint: str  # "SHA256:..." as OpenSSH prints it
    public_line: str  # "<type> <base64>", the known_hosts key part

    @classmethod
    def from_pkey(cls, key: paramiko.PKey) -> HostKey:
        return cls(key.get_name(), fingerprint(key), f"{key.get_name()} {key.get_base64()}")

    def known_hosts_line(self, host: str, port: int = 22) -> str:
        return f"{known_host_name(host, port)} {self.public_line}"

    def pkey(self) -> paramiko.PKey:
        key_type, b64 = self.public_line.split()[:2]
        return paramiko.PKey.from_type_string(key_type, base64.b64decode(b64))


def fingerprint(key: paramiko.PKey | bytes) -> str:
    """OpenSSH's SHA256 fingerprint: unpadded base64 of the SHA-256 of the key blob."""
    return known_hosts.fingerprint(key if isinstance(key, bytes) else key.asbytes())


normalize_fingerprint = known_hosts.normalize_fingerprint
known_host_name = known_hosts.host_name  # ``host`` on port 22, ``[host]:port`` otherwise


default_known_hosts_files = known_hosts.default_files


@dataclass(frozen=True)
class KnownEntry:
    path: Path
    lineno: int
    key: paramiko.PKey
    revoked: bool = False


def lookup(files: Iterable[os.PathLike | str], host: str, port: int = 22) -> list[KnownEntry]:
    """Every known_hosts entry for ``host``/``port`` across ``files`` (hashed names included).

    The lines are read by ``known_hosts.lookup``; an entry whose key paramiko cannot load
    (a type it does not know, or key material it refuses) is skipped, as a garbage line is.
    """
    found: list[KnownEntry] = []
    for k in known_hosts.lookup(files, host, port):
        try:
            key = paramiko.PKey.from_type_string(k.key_type, k.blob)
        except Exception:  # UnknownKeyType, or what bad key bytes raise (SSHException, ValueError, ...)
            continue
        found.append(KnownEntry(k.path, k.lineno, key, k.revoked))
    return found


def preferred_key_types(entries: list[KnownEntry], default: Iterable[str]) -> list[str]:
    """Host-key algorithms with the ones already known first, as OpenSSH orders them."""
    default = list(default)
    first: list[str] = []
    for e in entries:
        if e.revoked:
            continue
        for algo in _ALGOS_FOR_TYPE.get(e.key.get_name(), (e.key.get_name(),)):
            if algo in default and algo not in first:
                first.append(algo)
    return first + [a for a in default if a not in first]


def _changed(name: str, host: str, port: int, expected: str, got: str) -> HostKeyError:
    return HostKeyError(
        f"HOST KEY CHANGED for {name} ({host}:{port}): expected {expected}, got {got} — "
        f"someone may be intercepting the connection; if the device was reinstalled, "
        f"run `edgelab device trust {name} --replace`",
        remedy=f"verify the new key on the device, then run `edgelab device trust {name} --replace`",
    )


def verify(
    name: str,
    host: str,
    port: int,
    key: paramiko.PKey,
    *,
    known_hosts: Iterable[os.PathLike | str] = (),
    expected_fingerprint: str | None = None,
    alias: str | None = None,
) -> None:
    """Accept ``key`` for ``host:port`` or raise HostKeyError (unknown, changed or revoked)."""
    got = fingerprint(key)
    files = [*known_hosts, *default_known_hosts_files()]
    entries = lookup(files, alias or host, 22 if alias else port)
    for e in entries:
        if e.revoked and e.key.asbytes() == key.asbytes():
            raise HostKeyError(
                f"host key {got} of {name} ({host}:{port}) is marked @revoked in {e.path}:{e.lineno}",
                remedy="find out why it was revoked before connecting",
            )
    if expected_fingerprint:
        if normalize_fingerprint(expected_fingerprint) != got:
            raise _changed(name, host, port, normalize_fingerprint(expected_fingerprint), got)
        return
    live = [e for e in entries if not e.revoked]
    if any(e.key.asbytes() == key.asbytes() for e in live):
        return
    if live:
        same_type = [e for e in live if e.key.get_name() == key.get_name()] or live
        e = same_type[0]
        raise _changed(name, host, port, f"{fingerprint(e.key)} ({e.path}:{e.lineno})", got)
    raise HostKeyError(
        f"unknown host key for {name} ({host}:{port}): {key.get_name()} {got} — "
        f"check it, then run `edgelab device trust {name}`",
        remedy=f"edgelab device trust {name}",
    )


def add_known_host(
    path: os.PathLike | str,
    host: str,
    port: int,
    key: paramiko.PKey | HostKey,
    *,
    replace: bool = False,
) -> bool:
    """Record ``key`` for ``host:port`` in ``path``; True if the file changed.

    A different key already recorded for that name is an error unless ``replace``,
    which drops every old entry of that name first.
    """
    pkey = key.pkey() if isinstance(key, HostKey) else key
    path = Path(path)
    name = known_host_name(host, port)
    existing = lookup([path], host, port)
    if any(e.key.asbytes() == pkey.asbytes() and not e.revoked for e in existing):
        return False
    if existing and not replace:
        old = existing[0]
        raise _changed(host if port == 22 else name, host, port, fingerprint(old.key), fingerprint(pkey))
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if existing:
        drop = {e.lineno for e in existing}
        lines = [ln for i, ln in enumerate(lines, 1) if i not in drop]
    lines.append(f"{name} {pkey.get_name()} {pkey.get_base64()}")
    tmp = path.with_name(path.name + ".edgelab-part")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return True


def remove_known_host(path: os.PathLike | str, host: str, port: int = 22) -> int:
    """Drop every entry for ``host:port`` from ``path``; returns how many lines went."""
    path = Path(path)
    existing = lookup([path], host, port)
    if not existing:
        return 0
    drop = {e.lineno for e in existing}
    lines = [ln for i, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if i not in drop]
    path.write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")
    return len(drop)
