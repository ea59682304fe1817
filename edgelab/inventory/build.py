"""Device rows from CLI-style arguments (used by `device add` and the importers)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from edgelab.errors import ConfigError
from edgelab.inventory.address import parse_adb_serial, parse_adb_server, parse_jump, parse_ssh_address
from edgelab.store.devices import SHELLS, validate_device, validate_name
from edgelab.store.models import Device

DEVICE_CLASSES = ("jetson", "cuda_discrete", "x86_cpu", "arm64_cpu", "npu_phone")


def check_class(device_class: str | None) -> str | None:
    if device_class is not None and device_class not in DEVICE_CLASSES:
        raise ConfigError(
            f"unknown device class {device_class!r}", remedy=f"use one of {', '.join(DEVICE_CLASSES)}"
        )
    return device_class


def check_shell(shell: str) -> str:
    if shell not in SHELLS:
        raise ConfigError(f"unknown shell {shell!r}", remedy=f"use one of {', '.join(SHELLS)}")
    return shell


def ssh_device(
    name: str,
    address: str,
    *,
    jump: str | None = None,
    device_class: str | None = None,
    tags: Iterable[str] = (),
    notes: str = "",
    shell: str | None = None,
) -> Device:
    addr = parse_ssh_address(address)
    device = Device(
        name=validate_name(name),
        transport="ssh",
        ssh_user=addr.user,
        ssh_host=addr.host,
        ssh_port=addr.port,
        ssh_jump=parse_jump(jump) if jump else None,
        shell=check_shell(shell or "posix"),
        device_class=check_class(device_class),
        tags=list(tags),
        notes=notes,
    )
    return validate_device(device)


def adb_device(
    name: str,
    serial: str,
    *,
    adb_server: str | None = None,
    device_class: str | None = None,
    tags: Iterable[str] = (),
    notes: str = "",
    shell: str | None = None,
) -> Device:
    device = Device(
        name=validate_name(name),
        transport="adb",
        adb_serial=parse_adb_serial(serial),
        adb_server=parse_adb_server(adb_server) if adb_server else None,
        shell=check_shell(shell or "toybox"),
        device_class=check_class(device_class),
        tags=list(tags),
        notes=notes,
    )
    return validate_device(device)


def build_device(
    transport: str,
    name: str,
    address: str,
    *,
    jump: str | None = None,
    adb_server: str | None = None,
    **fields: Any,
) -> Device:
    """``ssh_device`` or ``adb_device`` by the transport a form chose (``address`` in that one's syntax;
    ``jump`` is the SSH route's, ``adb_server`` the ADB route's, the other one is ignored)."""
    builders = {
        "ssh": lambda: ssh_device(name, address, jump=jump, **fields),
        "adb": lambda: adb_device(name, address, adb_server=adb_server, **fields),
    }
    if transport not in builders:
        raise ConfigError(f"cannot add a {transport!r} device here", remedy="choose ssh or adb")
    return builders[transport]()
