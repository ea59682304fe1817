"""The adb server's host protocol (``4-hex-digit length + request``, OKAY/FAIL), over a plain socket.

A socket of our own, not adbutils' connection helper: that one starts an adb
server on the default port when it cannot connect, and edgelab must never
start (or touch) a server the operator did not ask for.
"""

from __future__ import annotations

import socket
from typing import TypeGuard

from edgelab.errors import DeviceNotAnswering, TransportError

DEFAULT_SERVER = "127.0.0.1:5037"


def parse_server(adb_server: str | None) -> tuple[str, int]:
    """``"host:port"`` (None = the local default server) -> (host, port)."""
    text = adb_server or DEFAULT_SERVER
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise TransportError(
            f"bad adb server address {text!r}", remedy="give it as host:port, e.g. 127.0.0.1:5037"
        )
    return host.strip("[]") or "127.0.0.1", int(port)


def is_tunnel(adb_server: str | None) -> TypeGuard[str]:
    """``ssh://...``: a server on another lab host's loopback, reached through SSH (transport.adb.tunnel)."""
    return adb_server is not None and adb_server.strip().lower().startswith("ssh://")


def is_remote(adb_server: str | None) -> bool:
    """A server on another lab host (by address, or ``ssh://``): its ``adb forward`` ports are bound there."""
    if not adb_server:
        return False
    if is_tunnel(adb_server):
        return True
    host = parse_server(adb_server)[0].lower()
    return not (host == "localhost" or host == "::1" or host.startswith("127."))


def open_server(adb_server: str | None, timeout: float = 10.0) -> socket.socket:
    if is_tunnel(adb_server):
        from edgelab.transport.adb.tunnel import local_address  # noqa: PLC0415 - paramiko only when tunnelling

        adb_server = local_address(adb_server, timeout)
    host, port = parse_server(adb_server)
    try:
        return socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        raise TransportError(
            f"no adb server at {host}:{port}: {e.strerror or e}",
            remedy="start it (`adb -P PORT start-server`, or `edgelab sim up` for the virtual lab)",
        ) from None


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError(f"adb connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def send_request(sock: socket.socket, request: str) -> None:
    """Send one request and raise TransportError with the server's reason on FAIL."""
    data = request.encode()
    sock.sendall(b"%04x" % len(data) + data)
    status = recv_exact(sock, 4)
    if status == b"OKAY":
        return
    if status == b"FAIL":
        raise TransportError(f"adb: {read_block(sock)}")
    raise TransportError(f"adb server sent {status!r} instead of OKAY/FAIL")


def read_block(sock: socket.socket) -> str:
    length = int(recv_exact(sock, 4), 16)
    return recv_exact(sock, length).decode("utf-8", "replace")


def host_query(adb_server: str | None, request: str, timeout: float = 10.0) -> str:
    """A ``host:`` request that answers with one length-prefixed string (devices, connect, version)."""
    with open_server(adb_server, timeout) as sock:
        try:
            send_request(sock, request)
            if request in ("host:kill",):
                return ""
            return read_block(sock)
        except (OSError, EOFError, ValueError) as e:
            raise TransportError(f"adb server at {adb_server}: {request} failed: {e}") from None


def list_devices(adb_server: str | None, timeout: float = 10.0) -> list[tuple[str, str]]:
    """Every device the server knows: (serial, state) with adb's words (device, offline, unauthorized...)."""
    out = []
    for line in host_query(adb_server, "host:devices", timeout).splitlines():
        serial, _, state = line.partition("\t")
        if serial:
            out.append((serial, state.strip()))
    return out


def open_transport(adb_server: str | None, serial: str, service: str, timeout: float = 10.0) -> socket.socket:
    """A socket connected to ``service`` on the device ``serial`` (shell,v2,...:, sync:, exec:)."""
    sock = open_server(adb_server, timeout)
    try:
        send_request(sock, f"host:transport:{serial}")
        send_request(sock, service)
    except TimeoutError:
        sock.close()
        raise not_answering(serial, adb_server, timeout) from None
    except (OSError, EOFError, ValueError) as e:
        sock.close()
        raise TransportError(
            f"adb device {serial}: opening {service.split(':', 1)[0]} failed: {e}",
            remedy="check the device with `adb devices`; reconnect it if it is offline",
        ) from None
    except BaseException:
        sock.close()
        raise
    return sock


def not_answering(
    serial: str, adb_server: str | None, timeout: float | None, name: str | None = None, doing: str = ""
) -> DeviceNotAnswering:
    """The error for a device the adb server lists but that never answered (frozen, hung)."""
    who = f"{name}: adb device {serial}" if name and name != serial else f"adb device {serial}"
    where = f" on adb server {adb_server}" if adb_server else ""
    after = f" within {timeout:g}s" if timeout else ""
    what = f" ({doing})" if doing else ""
    return DeviceNotAnswering(
        f"{who}{where} is listed but did not answer{after}{what}: frozen or hung",
        remedy=f"check it with `adb -s {serial} shell true`; if that hangs too, reconnect "
        f"(`adb disconnect {serial} && adb connect {serial}`) or reboot the device, then retry",
    )


def adb_binary() -> str:
    """The adb program adbutils would run (``ADBUTILS_ADB_PATH`` first, then its bundled one or PATH)."""
    from adbutils._utils import adb_path  # type: ignore[import-untyped]  # adbutils ships no types

    return adb_path()
