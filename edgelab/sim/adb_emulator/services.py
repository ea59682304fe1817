"""Which handler serves which ADB service name."""

from __future__ import annotations

from edgelab.sim.adb_emulator.connection import Handler
from edgelab.sim.adb_emulator.shell import parse_shell_service, serve_shell
from edgelab.sim.adb_emulator.sync import serve_sync
from edgelab.sim.adb_emulator.tcp import parse_tcp_service, serve_tcp


def resolve(service: str) -> Handler | None:
    if service == "sync:":
        return serve_sync
    if parse_shell_service(service) is not None:
        return serve_shell
    if parse_tcp_service(service) is not None:
        return serve_tcp
    return None
