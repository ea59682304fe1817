"""Reaching one SSH hop: resolution, TCP socket, key exchange, host-key check, authentication.

Why not ``paramiko.SSHClient``: its host-key policy runs only for hosts it has no key for, while
edgelab must also honour the fingerprint recorded on the device row and refuse before any
authentication is attempted. So the session is built from ``paramiko.Transport`` here: byte stream
(a TCP socket, or a jump channel the pool hands in), key exchange, host-key verification, then
key/agent authentication. Nothing here knows about pooling; ``pool`` sits on top.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
from typing import Any

import paramiko

from edgelab.errors import SSHNotAnswering, SSHUnreachable, TransportError
from edgelab.transport.base import Endpoint
from edgelab.transport.ssh import hostkeys
from edgelab.transport.ssh.config import Hop, resolve
from edgelab.transport.ssh.paramiko.auth import authenticate

log = logging.getLogger(__name__)
# paramiko logs a traceback for every failed handshake; an offline device is a state, not a crash.
# Without this, Python's last-resort handler would print them when the app configured no logging.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

WINDOW_SIZE = 32 << 20  # per-channel receive window: keeps large SFTP reads flowing
MAX_PACKET = 1 << 18
# AES-GCM is an AEAD: one OpenSSL call per packet instead of AES-CTR plus a separate HMAC-SHA256,
# about 25% less client CPU per byte pushed (measured on the push bench). CTR etc. stay offered.
PREFERRED_CIPHERS = ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com"]
# paramiko's own host-key type order, which known keys reorder; no public API names it (nor its stubs)
PARAMIKO_KEY_ORDER: tuple[str, ...] = paramiko.Transport._preferred_keys  # type: ignore[attr-defined]

Stream = socket.socket | paramiko.Channel


def resolve_endpoint(
    endpoint: Endpoint,
    *,
    ssh_config: str | os.PathLike[str] | None = None,
    known_hosts: str | os.PathLike[str] | None = None,
) -> Hop:
    """The concrete hop chain for ``endpoint`` (config files + endpoint fields)."""
    if endpoint.kind != "ssh":
        raise TransportError(f"{endpoint.name} is a {endpoint.kind} device, not ssh")
    return resolve(endpoint, ssh_config=ssh_config, known_hosts=known_hosts)


def unreachable(hop: Hop, exc: BaseException, timeout: float | None = None) -> SSHUnreachable:
    """One clear line about why ``hop`` could not be reached."""
    where = f"{hop.host}:{hop.port}"
    if isinstance(exc, ConnectionRefusedError):
        why = f"connection refused at {where}"
    elif isinstance(exc, socket.gaierror):
        why = f"cannot resolve {hop.host!r}"
    elif isinstance(exc, (TimeoutError, socket.timeout)):
        why = f"timed out connecting to {where}" + (f" after {timeout:g}s" if timeout else "")
    elif isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        why = f"{where} is unreachable ({exc.strerror})"
    elif isinstance(exc, paramiko.ChannelException):
        via = hop.jump[0].name if hop.jump else "the jump host"
        why = f"{via} could not open a connection to {where} ({exc.text})"
    elif isinstance(exc, EOFError):
        why = f"{where} closed the connection during the SSH handshake"
    elif isinstance(exc, paramiko.SSHException) and (
        "protocol banner" in str(exc) or "no SSH handshake" in str(exc)
    ):
        after = f" within {timeout:g}s" if timeout else ""
        return SSHNotAnswering(
            f"{hop.name}: {where} accepted the connection but sshd did not answer{after}: frozen or hung",
            remedy="the host or its sshd hangs (SIGSTOPped, swapping, overloaded): check its console, "
            "restart sshd or reboot it, then retry",
        )
    else:
        why = f"SSH to {where} failed: {exc}"
    return SSHUnreachable(
        f"{hop.name}: {why}",
        remedy="check that the device is powered, on the network and runs sshd (`edgelab device check`)",
    )


def tcp_socket(hop: Hop, *, timeout: float) -> socket.socket:
    """A TCP connection to ``hop`` (no jump host) with Nagle off."""
    try:
        sock = socket.create_connection((hop.host, hop.port), timeout=timeout)
    except OSError as e:
        raise unreachable(hop, e, timeout) from e
    # Small SSH packets (a forwarded request, an SSE chunk) must not wait for Nagle and the peer's
    # delayed ACK (40 ms a round trip), as OpenSSH's own client sets for interactive traffic.
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def handshake(
    sock: Stream,
    *,
    timeout: float,
    key_types: list[str] | None = None,
    ciphers: list[str] | None = None,
    **transport_kw: Any,
) -> paramiko.Transport:
    """Start an SSH client session on ``sock`` up to key exchange (no auth yet).

    ``ciphers`` moves those (that paramiko knows) to the front of its preference; the rest stay
    offered, so a server without them still negotiates."""
    t = paramiko.Transport(sock, **transport_kw)
    if ciphers:
        opts = t.get_security_options()
        have = list(opts.ciphers)
        first = [c for c in ciphers if c in have]
        opts.ciphers = tuple(first + [c for c in have if c not in first])
    t.banner_timeout = timeout
    t.handshake_timeout = timeout
    t.auth_timeout = timeout
    if key_types:
        t.get_security_options().key_types = key_types
    try:
        t.start_client(timeout=timeout)
        # start_client returns quietly when its timeout passes; a session needs a finished kex.
        if not t.is_active() or not t.initial_kex_done:
            raise paramiko.SSHException(f"no SSH handshake within {timeout:g}s (is an SSH server listening?)")
    except BaseException:
        t.close()
        raise
    return t


def known_entries(hop: Hop) -> list[hostkeys.KnownEntry]:
    """The known_hosts entries that apply to ``hop`` (its HostKeyAlias, if any, on port 22)."""
    return hostkeys.lookup(
        [*hop.known_hosts, *hostkeys.default_known_hosts_files()],
        hop.host_key_alias or hop.host,
        22 if hop.host_key_alias else hop.port,
    )


def verify_host_key(t: paramiko.Transport, hop: Hop) -> None:
    """Accept the server's key for ``hop`` or raise HostKeyError (see ``hostkeys.verify``)."""
    hostkeys.verify(
        hop.name,
        hop.host,
        hop.port,
        t.get_remote_server_key(),
        known_hosts=hop.known_hosts,
        expected_fingerprint=hop.expected_fingerprint,
        alias=hop.host_key_alias,
    )


def start_session(sock: Stream, hop: Hop, *, timeout: float) -> paramiko.Transport:
    """A verified, authenticated paramiko Transport over ``sock``; closes ``sock`` on failure."""
    known = known_entries(hop)
    try:
        t = handshake(
            sock,
            timeout=timeout,
            key_types=hostkeys.preferred_key_types(known, PARAMIKO_KEY_ORDER),
            ciphers=PREFERRED_CIPHERS,
            default_window_size=WINDOW_SIZE,
            default_max_packet_size=MAX_PACKET,
        )
    except (OSError, EOFError, paramiko.SSHException) as e:
        sock.close()
        raise unreachable(hop, e, timeout) from e
    try:
        verify_host_key(t, hop)  # before any authentication: never offer a key to an impostor
        authenticate(t, hop)
    except BaseException:
        t.close()
        raise
    t.set_keepalive(int(max(1, hop.keepalive_s)))
    return t


def read_host_key(sock: Stream, hop: Hop, *, timeout: float) -> hostkeys.HostKey:
    """The host key the server on ``sock`` presents (key exchange only, no auth); closes ``sock``."""
    known = known_entries(hop)
    try:
        t = handshake(
            sock, timeout=timeout, key_types=hostkeys.preferred_key_types(known, PARAMIKO_KEY_ORDER)
        )
    except (OSError, EOFError, paramiko.SSHException) as e:
        sock.close()
        raise unreachable(hop, e, timeout) from e
    try:
        return hostkeys.HostKey.from_pkey(t.get_remote_server_key())
    finally:
        t.close()
