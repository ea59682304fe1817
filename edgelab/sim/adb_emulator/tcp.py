"""``tcp:PORT`` (and ``tcp:PORT:HOST``): a stream to a TCP port on the device, as adbd serves it.

The adb server opens this service for every connection to a port set up with ``adb forward
tcp:LOCAL tcp:PORT``. A virtual device's processes are lab-host processes, so its loopback is the
lab host's: the stream is joined to ``127.0.0.1:PORT`` here. A refused connection closes the
stream, which the adb server turns into a closed forwarded connection (what adbd does).
"""

from __future__ import annotations

import asyncio
import contextlib

from edgelab.sim.adb_emulator.connection import Stream, StreamClosed
from edgelab.sim.adb_emulator.device import DeviceSpec


def parse_tcp_service(service: str) -> tuple[str, int] | None:
    """``tcp:8080`` -> ("127.0.0.1", 8080); ``tcp:8080:host`` -> ("host", 8080); else None."""
    if not service.startswith("tcp:"):
        return None
    parts = service.rstrip("\0").split(":")
    if len(parts) not in (2, 3) or not parts[1].isdigit():
        return None
    port = int(parts[1])
    if not 0 < port < 65536:
        return None
    return (parts[2] if len(parts) == 3 and parts[2] else "127.0.0.1"), port


async def serve_tcp(stream: Stream, spec: DeviceSpec) -> None:
    host, port = parse_tcp_service(stream.service) or ("127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        return  # the handler's end closes the stream: connection refused

    async def to_device() -> None:
        try:
            while True:
                data = await stream.read(65536)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        except (StreamClosed, ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                writer.write_eof()

    async def to_host() -> None:
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                await stream.write(data)
        except (StreamClosed, ConnectionError, OSError):
            pass

    up = asyncio.create_task(to_device())
    try:
        await to_host()
    finally:
        up.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await up
        writer.close()
