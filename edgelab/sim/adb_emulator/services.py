"""Which handler serves which ADB service name."""

from __future__ import annotations

from edgelab.sim.adb_emulator.connection import Handler
from edgelab.sim.adb_emulator.shell import parse_shell_service, serve_shell
from edgelab.sim.adb_emulator.sync import serve_sync


def resolve(service: str) -> Handler | None:
    if service == "sync:":
        return serve_sync
    if parse_shell_service(service) is not None:
        return serve_shell
    return None
