"""SSH transport over paramiko: pooled connections, strict host keys, SFTP transfers.

The package, by concept (lower modules never import higher ones):

- ``auth``: which keys to offer (the refusal, ``SSHAuthError``, is in ``edgelab.errors``);
- ``connect``: one hop: resolution, TCP, key exchange, host-key check, authentication;
- ``pool``: the per-process connection pool and jump-host streams (``fetch_host_key``);
- ``channel``: a command's stdout/stderr pump, exit status, streamed process;
- ``sftp``: atomic, hashed upload and download;
- ``bulk``: resumable uploads through the system OpenSSH client, held to edgelab's host-key trust;
- ``transport``: ``SSHTransport``, the transport surface built from the above.

``from edgelab.transport.ssh import X`` keeps working for every name re-exported here.
"""

from __future__ import annotations

from edgelab.transport.ssh.auth import DEFAULT_KEY_FILES
from edgelab.transport.ssh.channel import COPY_CHUNK, KILL_GRACE_S, SSHProcess
from edgelab.transport.ssh.connect import (
    MAX_PACKET,
    PREFERRED_CIPHERS,
    WINDOW_SIZE,
    handshake,
    resolve_endpoint,
    unreachable,
)
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

_POOL = POOL  # the name tests and older callers use

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
