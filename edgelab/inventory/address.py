"""Parse the addresses an operator types: ``[user@]host[:port]`` for SSH, ``host:port`` for an adb server.

Parsing happens once, here, so a password typed into an address is refused before it
can reach the database or a log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from edgelab.errors import ConfigError

_HOST = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9._-]{0,253})")
_USER = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.+-]{0,63}\$?")
ADB_DEFAULT_PORT = 5037


@dataclass(frozen=True)
class SshAddress:
    user: str | None
    host: str
    port: int | None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and self.port else self.host
        return (f"{self.user}@" if self.user else "") + host + (f":{self.port}" if self.port else "")


def _port(text: str, what: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ConfigError(f"bad port {text!r} in {what}", remedy="use a port number in 1-65535")
    return int(text)


def _host(text: str, what: str) -> str:
    if _HOST.fullmatch(text):
        return text
    if ":" in text and re.fullmatch(r"[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?", text):  # IPv6
        return text
    raise ConfigError(
        f"bad host {text!r} in {what}", remedy="use a host name or an IP address, e.g. 192.168.1.20"
    )


def parse_ssh_address(text: str) -> SshAddress:
    """``[user@]host[:port]``, also ``[v6addr]:port``; a ``user:password@`` part is refused."""
    what = repr(text)
    s = text.strip()
    if s.startswith("ssh://"):
        s = s[len("ssh://") :]
    user = None
    if "@" in s:
        user, _, s = s.rpartition("@")
        if ":" in user:
            raise ConfigError(
                f"the address {user.split(':')[0]}:***@{s} holds a password; edgelab never stores secrets",
                remedy="give only user@host and authenticate with an SSH key or the agent (ssh-copy-id)",
            )
        if not _USER.fullmatch(user):
            raise ConfigError(f"bad user name in {what}", remedy="use [user@]host[:port]")
    port = None
    if s.startswith("["):
        host, sep, rest = s[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ConfigError(f"bad address {what}", remedy="write IPv6 with a port as [addr]:port")
        if rest:
            port = _port(rest[1:], what)
    elif s.count(":") == 1:
        host, _, p = s.partition(":")
        port = _port(p, what)
    else:
        host = s
    if not host:
        raise ConfigError(f"no host in {what}", remedy="use [user@]host[:port]")
    return SshAddress(user or None, _host(host, what), port)


def parse_jump(text: str) -> str:
    """A ProxyJump value: one or more ``[user@]host[:port]`` separated by commas, each validated."""
    parts = [p.strip() for p in text.split(",")]
    if not all(parts):
        raise ConfigError(
            f"bad jump host list {text!r}", remedy="use [user@]host[:port], comma-separated for a chain"
        )
    return ",".join(str(parse_ssh_address(p)) for p in parts)


def parse_adb_server(text: str) -> str:
    """``host[:port]`` of an adb server (default port 5037), normalised to ``host:port``; or
    ``ssh://[user@]host[:port][/adb_port]`` for one on another lab host's loopback, reached through SSH
    (normalised to ``ssh://[user@]host[:port]/adb_port``; a password part is refused)."""
    s = text.strip()
    if s.lower().startswith("ssh://"):
        rest = s[len("ssh://") :]
        addr, sep, adb = rest.partition("/")
        if sep and (not adb.isdigit() or not 0 < int(adb) < 65536):
            raise ConfigError(
                f"bad adb port {adb!r} in adb server {parse_ssh_address(addr)}",
                remedy="write the adb server's port on that host after a slash: ssh://host/5037",
            )
        return f"ssh://{parse_ssh_address(addr)}/{int(adb) if sep else ADB_DEFAULT_PORT}"
    if "@" in s:
        raise ConfigError(
            f"adb server {'***@' + s.rpartition('@')[2]!r} holds a user part; an adb server takes none",
            remedy="use host:port",
        )
    what = f"adb server {text!r}"
    if s.startswith("["):
        host, _, rest = s[1:].partition("]")
        port = _port(rest[1:], what) if rest.startswith(":") else ADB_DEFAULT_PORT
        return f"[{_host(host, what)}]:{port}"
    host, _, p = s.partition(":")
    port = _port(p, what) if p else ADB_DEFAULT_PORT
    return f"{_host(host, what)}:{port}"


def parse_adb_serial(text: str) -> str:
    """A serial as ``adb devices`` prints it; a ``user[:password]@`` part is refused, never stored."""
    s = text.strip()
    if "@" in s:
        user, _, rest = s.rpartition("@")
        secret = ":" in user or bool(user)
        shown = f"{'***' if secret else ''}@{rest}"
        raise ConfigError(
            f"the adb serial {shown} holds a user{'/password' if ':' in user else ''} part; an adb serial takes "
            "none, and edgelab never stores secrets",
            remedy=f"give the serial alone ({rest}); pair a Wi-Fi device once with `adb pair` instead",
        )
    if not s or any(c.isspace() for c in s) or len(s) > 128:
        raise ConfigError(
            f"bad adb serial {text!r}",
            remedy="use the serial `adb devices` prints, e.g. R5CX1234 or 127.0.0.1:5586",
        )
    return s
