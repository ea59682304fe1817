"""SSH transport over paramiko: pooled connections, strict host keys, SFTP transfers.

The package, by concept (lower modules never import higher ones):

- ``auth``: which keys to offer (the refusal, ``SSHAuthError``, is in ``edgelab.errors``);
- ``connect``: one hop: resolution, TCP, key exchange, host-key check, authentication;
- ``pool``: the per-process connection pool and jump-host streams (``fetch_host_key``);
- ``channel``: a command's stdout/stderr pump, exit status, streamed process;
- ``sftp``: atomic, hashed upload and download;
- ``pinned_client``: the system OpenSSH client's private config and known_hosts (edgelab's trust only);
- ``bulk``: resumable uploads through that client, beside a paramiko connection;
- ``session``, ``session_transport``: a fresh push in one OpenSSH login, without paramiko;
- ``transport``: ``SSHTransport``, the transport surface built from the above.

``from edgelab.transport.ssh import X`` keeps working for every name re-exported here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgelab.transport.ssh.channel import COPY_CHUNK, KILL_GRACE_S, SSHProcess
    from edgelab.transport.ssh.connect import (
        MAX_PACKET,
        PREFERRED_CIPHERS,
        WINDOW_SIZE,
        handshake,
        resolve_endpoint,
        unreachable,
    )
    from edgelab.transport.ssh.pinned_client import DEFAULT_KEY_FILES
    from edgelab.transport.ssh.pool import (
        IDLE_CLOSE_S,
        POOL,
        close_all,
        fetch_host_key,
        open_socket,
        release_jump,
    )
    from edgelab.transport.ssh.sftp import SFTP_READ
    from edgelab.transport.ssh.transport import SSHTransport

# The names above load on first use (PEP 562), so a module of this package that needs no paramiko
# (``pinned_client``, ``session``, ``session_transport``: a fresh push in one OpenSSH login) is imported
# without it.
_LAZY = {
    "COPY_CHUNK": "channel",
    "KILL_GRACE_S": "channel",
    "SSHProcess": "channel",
    "MAX_PACKET": "connect",
    "PREFERRED_CIPHERS": "connect",
    "WINDOW_SIZE": "connect",
    "handshake": "connect",
    "resolve_endpoint": "connect",
    "unreachable": "connect",
    "DEFAULT_KEY_FILES": "pinned_client",
    "IDLE_CLOSE_S": "pool",
    "POOL": "pool",
    "_POOL": "pool",  # the name tests and older callers use
    "close_all": "pool",
    "fetch_host_key": "pool",
    "open_socket": "pool",
    "release_jump": "pool",
    "SFTP_READ": "sftp",
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
