"""An adb server on another lab host, reached through SSH: ``--adb-server ssh://[user@]host[:port][/adb_port]``.

The phones hang off another host's USB hubs and its adb server listens on that host's loopback
only (adb's default, and the safe one: the adb protocol has no authentication). edgelab does what
``ssh -L 5037:127.0.0.1:5037 labhost2`` would, over its own paramiko connection pool: one lab-side
``127.0.0.1`` listener per server and process, each accepted connection a ``direct-tcpip`` channel
to ``127.0.0.1:adb_port`` on that host. Everything above (``adb_server.open_server``) then speaks
the adb host protocol to a plain local socket.

The SSH hop is an ordinary SSH endpoint: ``~/.ssh/config`` (HostName, User, IdentityFile, even
ProxyJump) applies, keys or the agent authenticate, and the host key must be trusted first
(``edgelab device trust`` on any device of that server); nothing of it is stored but the address.
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass

from edgelab.errors import ConfigError, HostKeyError, TransportError
from edgelab.transport.base import Endpoint

SCHEME = "ssh://"
DEFAULT_ADB_PORT = 5037


@dataclass(frozen=True)
class TunnelSpec:
    """``ssh://user@host:port/adb_port`` taken apart; ``ssh`` is ``[user@]host[:port]``."""

    user: str | None
    host: str
    port: int | None
    adb_port: int = DEFAULT_ADB_PORT

    @property
    def ssh(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and self.port else self.host
        return (f"{self.user}@" if self.user else "") + host + (f":{self.port}" if self.port else "")

    def __str__(self) -> str:
        return f"{SCHEME}{self.ssh}/{self.adb_port}"

    def endpoint(self) -> Endpoint:
        """The SSH endpoint of the lab host that runs the adb server."""
        return Endpoint(name=self.ssh, kind="ssh", ssh_user=self.user, ssh_host=self.host, ssh_port=self.port)


def is_tunnel(adb_server: str | None) -> bool:
    return adb_server is not None and adb_server.strip().lower().startswith(SCHEME)


def parse(text: str) -> TunnelSpec:
    """``ssh://[user@]host[:port][/adb_port]``; the adb port defaults to 5037 on that host's loopback."""
    s = text.strip()
    if not s.lower().startswith(SCHEME):
        raise ConfigError(
            f"{text!r} is not an ssh:// adb server", remedy="use ssh://[user@]host[:port][/adb_port]"
        )
    rest = s[len(SCHEME) :]
    addr, sep, adb = rest.partition("/")
    adb_port = DEFAULT_ADB_PORT
    if sep:
        if not adb.isdigit() or not 0 < int(adb) < 65536:
            raise ConfigError(
                f"bad adb port {adb!r} in {text!r}",
                remedy="write the adb server's port on that host after a slash: ssh://host/5037",
            )
        adb_port = int(adb)
    from edgelab.transport.ssh.config import parse_jump_spec  # noqa: PLC0415 - only an ssh:// server needs it

    user, host, port = parse_jump_spec(
        addr
    )  # validated (no password part) by inventory.address on the way in
    return TunnelSpec(user, host, port, adb_port)


class _Tunnel:
    def __init__(self, transport, forward):
        self.transport = transport
        self.forward = forward

    def alive(self) -> bool:
        return not self.forward.closed and self.transport.paramiko_transport.is_active()

    def verify(self) -> None:
        from edgelab.transport.ssh import hostkeys

        hop = self.transport.hop
        hostkeys.verify(
            hop.name,
            hop.host,
            hop.port,
            self.transport.paramiko_transport.get_remote_server_key(),
            known_hosts=hop.known_hosts,
            expected_fingerprint=hop.expected_fingerprint,
            alias=hop.host_key_alias,
        )

    def close(self) -> None:
        self.forward.close()
        self.transport.close()


_LOCK = threading.Lock()
_TUNNELS: dict[str, _Tunnel] = {}


def local_address(adb_server: str, timeout: float = 10.0) -> str:
    """``127.0.0.1:PORT`` of this process's tunnel to the ssh:// adb server (opened on first use)."""
    spec = parse(adb_server)
    key = str(spec)
    try:
        with _LOCK:
            return _tunnel(spec, timeout).forward.url_host
    except HostKeyError as e:
        from edgelab.transport.on_the_way import on_the_way

        err = on_the_way(e, spec.ssh, None)  # the device is named by whoever asked (ADBTransport)
        raise HostKeyError(f"adb server {key}: {err}", remedy=err.remedy) from None
    except TransportError as e:  # the same kind (SSHAuthError, SSHUnreachable...), saying which server
        raise type(e)(
            f"adb server {key}: {e}", remedy=e.remedy or "check the SSH access to that host"
        ) from None


def _tunnel(spec: TunnelSpec, timeout: float) -> _Tunnel:
    key = str(spec)
    tunnel = _TUNNELS.get(key)
    if tunnel is not None and tunnel.alive():
        tunnel.verify()  # trust may have been withdrawn since it opened, as for a pooled connection
        return tunnel
    if tunnel is not None:
        tunnel.close()
        del _TUNNELS[key]
    from edgelab.transport.ssh import SSHTransport  # noqa: PLC0415 - paramiko only when tunnelling

    t = SSHTransport.connect(spec.endpoint(), timeout=timeout)
    tunnel = _TUNNELS[key] = _Tunnel(t, t.forward(spec.adb_port))
    return tunnel


def for_device(err: HostKeyError, name: str) -> HostKeyError:
    """The tunnel host's key error, naming the device whose trust command reaches that host."""
    fix = f"edgelab device trust {name}"
    return HostKeyError(
        str(err).replace("edgelab device trust DEVICE", fix),
        remedy=(err.remedy or fix).replace("edgelab device trust DEVICE", fix),
    )


def auth_failed(err: BaseException) -> bool:
    """Whether ``err`` is the tunnel host refusing every key (a state of its own for ``device check``)."""
    from edgelab.errors import SSHAuthError

    return isinstance(err, SSHAuthError)


def close_all() -> None:
    """Stop every tunnel of this process."""
    with _LOCK:
        tunnels = list(_TUNNELS.values())
        _TUNNELS.clear()
    for t in tunnels:
        t.close()


atexit.register(close_all)
