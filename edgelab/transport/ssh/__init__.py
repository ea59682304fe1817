"""SSH transport: two routes to a device, paramiko and the system OpenSSH client, under one trust.

The package, by route (lower modules never import higher ones):

- ``config``: an endpoint resolved the way OpenSSH would (``Hop``; ``openssh_config``: ``ssh -G``);
- ``known_hosts``, ``hostkeys``: host-key trust: known_hosts read with the standard library alone,
  fingerprints and the refusal rules;
- ``paramiko/``: the paramiko route: ``auth`` (which keys to offer; the refusal, ``SSHAuthError``,
  is in ``edgelab.errors``), ``connect`` (one hop: resolution, TCP, key exchange, host-key check,
  authentication), ``pool`` (the per-process connection pool and jump-host streams,
  ``fetch_host_key``), ``channel`` (a command's stdout/stderr pump, exit status, streamed process),
  ``sftp`` (atomic, hashed upload and download);
- ``openssh/``: the system OpenSSH client's route: ``pinned_client`` (its private config and
  known_hosts, edgelab's trust only), ``bulk`` (resumable uploads through it, beside a paramiko
  connection), ``session`` (one login running a small request loop on the device);
- ``transport``: ``SSHTransport``, the transport surface built from both routes;
  ``session_transport``: a fresh push in one OpenSSH login, without paramiko (paramiko as fallback).

``from edgelab.transport.ssh import X`` keeps working for every name re-exported here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgelab.transport.ssh.openssh.pinned_client import DEFAULT_KEY_FILES
    from edgelab.transport.ssh.paramiko.channel import COPY_CHUNK, KILL_GRACE_S, SSHProcess
    from edgelab.transport.ssh.paramiko.connect import (
        MAX_PACKET,
        PREFERRED_CIPHERS,
        WINDOW_SIZE,
        handshake,
        resolve_endpoint,
        unreachable,
    )
    from edgelab.transport.ssh.paramiko.pool import (
        IDLE_CLOSE_S,
        POOL,
        close_all,
        fetch_host_key,
        open_socket,
        release_jump,
    )
    from edgelab.transport.ssh.paramiko.sftp import SFTP_READ
    from edgelab.transport.ssh.transport import SSHTransport

# The names above load on first use (PEP 562), so a module of this package that needs no paramiko
# (``config``, ``known_hosts``, ``openssh/`` but ``bulk``, ``session_transport``: a fresh push in one
# OpenSSH login) is imported without it.
_LAZY = {
    "COPY_CHUNK": "paramiko.channel",
    "KILL_GRACE_S": "paramiko.channel",
    "SSHProcess": "paramiko.channel",
    "MAX_PACKET": "paramiko.connect",
    "PREFERRED_CIPHERS": "paramiko.connect",
    "WINDOW_SIZE": "paramiko.connect",
    "handshake": "paramiko.connect",
    "resolve_endpoint": "paramiko.connect",
    "unreachable": "paramiko.connect",
    "DEFAULT_KEY_FILES": "openssh.pinned_client",
    "IDLE_CLOSE_S": "paramiko.pool",
    "POOL": "paramiko.pool",
    "_POOL": "paramiko.pool",  # the name tests and older callers use
    "close_all": "paramiko.pool",
    "fetch_host_key": "paramiko.pool",
    "open_socket": "paramiko.pool",
    "release_jump": "paramiko.pool",
    "SFTP_READ": "paramiko.sftp",
    "SSHTransport": "transport",
}

if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), "POOL" if name == "_POOL" else name)
        globals()[name] = value
        return value


__all__ = [
    "COPY_CHUNK",
    "DEFAULT_KEY_FILES",
    "IDLE_CLOSE_S",
    "KILL_GRACE_S",
    "MAX_PACKET",
    "POOL",
    "PREFERRED_CIPHERS",
    "SFTP_READ",
    "WINDOW_SIZE",
    "SSHProcess",
    "SSHTransport",
    "close_all",
    "fetch_host_key",
    "handshake",
    "open_socket",
    "release_jump",
    "resolve_endpoint",
    "unreachable",
]
