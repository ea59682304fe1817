"""Serve every configured device, one listening socket each, on loopback only."""

from __future__ import annotations

import asyncio
import logging

from edgelab.sim.adb_emulator.connection import Connection
from edgelab.sim.adb_emulator.device import DeviceSpec
from edgelab.sim.adb_emulator.services import resolve

log = logging.getLogger(__name__)
HOST = "127.0.0.1"


async def _serve_device(spec: DeviceSpec) -> asyncio.base_events.Server:
    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        log.info("%s: host connected from %s", spec.name, writer.get_extra_info("peername"))
        await Connection(spec, reader, writer, resolve).serve()

    return await asyncio.start_server(on_client, HOST, spec.port, reuse_address=True)


async def serve(specs: list[DeviceSpec], stop: asyncio.Event, ready=None) -> None:
    """Listen for every device until ``stop`` is set; ``ready()`` is called once all listen."""
    servers = [await _serve_device(spec) for spec in specs]
    for spec in specs:
        log.info("%s: listening on %s:%d (persona %s)", spec.name, HOST, spec.port, spec.persona_dir.name)
    if ready is not None:
        ready()
    try:
        await stop.wait()
    finally:
        for server in servers:
            server.close()
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()
