"""How a device is reached, as text: the address shown in listings and the key that says two
inventory rows are one physical device. Only this package knows what each transport's fields mean.

Both take any row with the device record's reach fields (an ORM ``Device``, a quick-read row, an
``Endpoint`` via ``reach_of``), so a listing need not build endpoints.
"""

from __future__ import annotations

from typing import Protocol

DEFAULT_ADB_SERVER = "127.0.0.1:5037"


class Reach(Protocol):
    """The device record's reach fields (``store.models.Device`` has them)."""

    name: str
    transport: str
    ssh_user: str | None
    ssh_host: str | None
    ssh_port: int | None
    ssh_jump: str | None
    adb_serial: str | None
    adb_server: str | None


def display_address(d: Reach) -> str:
    """``user@host:port via jump`` for SSH, ``serial @ server`` for ADB, ``local`` for the lab host."""
    if d.transport == "ssh":
        host = f"[{d.ssh_host}]" if d.ssh_host and ":" in d.ssh_host and d.ssh_port else (d.ssh_host or "")
        text = (f"{d.ssh_user}@" if d.ssh_user else "") + host + (f":{d.ssh_port}" if d.ssh_port else "")
        return text + (f" via {d.ssh_jump}" if d.ssh_jump else "")
    if d.transport == "adb":
        return (d.adb_serial or "") + (f" @ {d.adb_server}" if d.adb_server else "")
    return "local"


def _local_host(host: str) -> str:
    h = host.strip().lower()
    return "127.0.0.1" if h in ("localhost", "::1", "[::1]", "127.0.0.1") else h


def physical_key(d: Reach) -> str:
    """What makes two inventory rows one device: the adb serial on its server, the ssh host and port."""
    if d.transport == "adb":
        server = d.adb_server or DEFAULT_ADB_SERVER
        if server.lower().startswith("ssh://"):  # the server on another lab host, by its SSH address
            return f"adb:{server.lower()}/{d.adb_serial}"
        host, _, port = server.rpartition(":")
        return f"adb:{_local_host(host or '127.0.0.1')}:{port or '5037'}/{d.adb_serial}"
    if d.transport == "ssh":
        via = f"{d.ssh_jump.lower()}>" if d.ssh_jump else ""
        return f"ssh:{via}{_local_host(d.ssh_host or '')}:{d.ssh_port or 22}"
    return f"{d.transport}:{d.name}"


def has_host_keys(transport: str) -> bool:
    """Whether devices reached this way present a host key the operator trusts (``device trust``)."""
    return transport == "ssh"


def host_keys_on_the_way(transport: str) -> bool:
    """Whether the way to such a device may pass SSH hosts whose keys need trust: an SSH device (and
    its jump hosts), or an ADB device whose adb server sits on another lab host (``ssh://``)."""
    return transport in ("ssh", "adb")
