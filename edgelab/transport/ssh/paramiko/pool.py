"""The per-process SSH connection pool, and the byte streams that ride on it (jump hosts).

One authenticated paramiko Transport per (user, host, port, jump chain): every ``SSHTransport``
to the same device shares it, and a hop behind a ``ProxyJump`` reaches its target through a
``direct-tcpip`` channel of the pooled jump connection, which stays referenced while it lives.
"""

from __future__ import annotations

import atexit
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import paramiko

from edgelab.errors import HostKeyError
from edgelab.transport.base import Endpoint
from edgelab.transport.ssh.config import Hop
from edgelab.transport.ssh.hostkeys import HostKey
from edgelab.transport.ssh.paramiko.connect import (
    Stream,
    read_host_key,
    resolve_endpoint,
    start_session,
    tcp_socket,
    unreachable,
    verify_host_key,
)

IDLE_CLOSE_S = 300.0  # pooled connections nobody used for this long are closed

PoolKey = tuple[str, str, int, tuple[Any, ...]]


@dataclass
class _Entry:
    transport: paramiko.Transport
    hop: Hop
    refs: int = 0
    last_used: float = field(default_factory=time.monotonic)

    def close(self) -> None:
        self.transport.close()
        release_jump(self.hop)


class _Pool:
    """One authenticated paramiko Transport per (user, host, port, jump chain) in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[PoolKey, _Entry] = {}
        self._key_locks: dict[PoolKey, threading.Lock] = {}

    def _key_lock(self, key: PoolKey) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    def acquire(
        self, hop: Hop, *, timeout: float, dead: paramiko.Transport | None = None
    ) -> paramiko.Transport:
        """The pooled connection for ``hop`` (one more reference); a new one if none or ``dead``."""
        self._reap()
        key = hop.pool_key
        with self._key_lock(key):
            with self._lock:
                entry = self._entries.get(key)
            if entry is not None and entry.transport.is_active() and entry.transport is not dead:
                verify_host_key(entry.transport, hop)  # this endpoint may pin a different fingerprint
                with self._lock:
                    entry.refs += 1
                    entry.last_used = time.monotonic()
                return entry.transport
            if entry is not None:
                with self._lock:
                    self._entries.pop(key, None)
                entry.close()
            t = open_session_transport(hop, timeout)
            with self._lock:
                refs = entry.refs if entry is not None else 0
                self._entries[key] = _Entry(t, hop, refs + 1)
            return t

    def release(self, hop: Hop) -> None:
        with self._lock:
            entry = self._entries.get(hop.pool_key)
            if entry is not None:
                entry.refs = max(0, entry.refs - 1)
                entry.last_used = time.monotonic()

    def _reap(self) -> None:
        now = time.monotonic()
        with self._lock:
            stale = [
                k
                for k, e in self._entries.items()
                if (e.refs == 0 and now - e.last_used > IDLE_CLOSE_S) or not e.transport.is_active()
            ]
            dropped = [self._entries.pop(k) for k in stale if self._entries[k].refs == 0]
        for e in dropped:
            e.close()

    def close_all(self) -> None:
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        for e in entries:
            e.transport.close()  # jump entries are in the list too

    def size(self) -> int:
        with self._lock:
            return len(self._entries)


POOL = _Pool()
atexit.register(POOL.close_all)


def close_all() -> None:
    """Close every pooled SSH connection of this process, and the OpenSSH uploaders beside them."""
    from edgelab.transport.ssh.openssh import bulk

    bulk.close_all()
    POOL.close_all()


def open_socket(hop: Hop, *, timeout: float) -> Stream:
    """A byte stream to ``hop``: a TCP socket, or a ``direct-tcpip`` channel through its jump host."""
    timeout = hop.connect_timeout or timeout
    if hop.jump:
        # The jump connection stays referenced while this hop's session lives (see _Entry.close).
        try:
            jump = POOL.acquire(hop.jump[0], timeout=timeout)
        except (
            HostKeyError
        ) as e:  # the jump host's key: trusted through the device (device trust walks there)
            from edgelab.transport.on_the_way import on_the_way

            raise on_the_way(e, hop.jump[0].name, hop.name) from None
        try:
            return jump.open_channel("direct-tcpip", (hop.host, hop.port), ("127.0.0.1", 0), timeout=timeout)
        except (paramiko.SSHException, EOFError, OSError) as e:
            POOL.release(hop.jump[0])
            raise unreachable(hop, e, timeout) from e
    return tcp_socket(hop, timeout=timeout)


def release_jump(hop: Hop) -> None:
    """Drop the reference ``open_socket`` took on ``hop``'s jump connection."""
    if hop.jump:
        POOL.release(hop.jump[0])


def open_session_transport(hop: Hop, timeout: float) -> paramiko.Transport:
    """A fresh, verified, authenticated paramiko Transport to ``hop`` (not pooled by itself)."""
    sock = open_socket(hop, timeout=timeout)
    try:
        return start_session(sock, hop, timeout=timeout)
    except BaseException:
        release_jump(hop)
        raise


def fetch_host_key(endpoint: Endpoint, timeout: float = 5.0, **options: Any) -> HostKey:
    """Connect to ``endpoint`` (through its jump hosts), read the server's host key, no auth.

    This is what ``edgelab device trust`` shows the operator before recording it.
    """
    hop = resolve_endpoint(endpoint, **options)
    sock = open_socket(hop, timeout=timeout)
    try:
        return read_host_key(sock, hop, timeout=timeout)
    finally:
        release_jump(hop)
