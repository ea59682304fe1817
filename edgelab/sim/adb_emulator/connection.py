"""One host connection: handshake, the stream table, and flow control per stream.

Flow control as adbd does it: every WRTE from the host is answered with OKAY
(held back while a stream's unread input is large, so a slow consumer slows
the host), and we send the next WRTE on a stream only after the host's OKAY.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable

from edgelab.sim.adb_emulator import protocol as p
from edgelab.sim.adb_emulator.device import FEATURES, DeviceSpec

log = logging.getLogger(__name__)

_INPUT_HIGH_WATER = 4 * p.MAX_PAYLOAD  # unread input beyond this holds the host's next WRTE back


class StreamClosed(Exception):
    """The host closed the stream (or the connection went away)."""


class Stream:
    """A bidirectional byte stream multiplexed over the connection."""

    def __init__(self, conn: Connection, local_id: int, remote_id: int, service: str):
        self.conn = conn
        self.local_id = local_id
        self.remote_id = remote_id
        self.service = service
        self._inbuf = bytearray()
        self._data = asyncio.Event()
        self._can_send = asyncio.Event()
        self._can_send.set()  # one WRTE may follow our OKAY to the OPEN
        self._ack_pending = False
        self.closed = False  # no more traffic either way
        self._on_close: list[Callable[[], None]] = []

    # -- input ---------------------------------------------------------
    async def _on_write(self, data: bytes) -> None:
        self._inbuf += data
        self._data.set()
        if len(self._inbuf) < _INPUT_HIGH_WATER:
            await self.conn.send(p.Message(p.A_OKAY, self.local_id, self.remote_id))
        else:
            self._ack_pending = True

    async def _release(self) -> None:
        if self._ack_pending and len(self._inbuf) < _INPUT_HIGH_WATER and not self.closed:
            self._ack_pending = False
            await self.conn.send(p.Message(p.A_OKAY, self.local_id, self.remote_id))

    async def read(self, n: int = 65536) -> bytes:
        """Up to ``n`` bytes; b"" once the host closed the stream."""
        while not self._inbuf:
            if self.closed:
                return b""
            self._data.clear()
            await self._data.wait()
        if len(self._inbuf) <= n:  # all of it: one copy, as a real adbd's read(2) would make
            out = bytes(self._inbuf)
            self._inbuf.clear()
        else:
            with memoryview(self._inbuf) as view:
                out = bytes(view[:n])
            del self._inbuf[:n]
        await self._release()
        return out

    async def readexactly(self, n: int) -> bytes:
        first = await self.read(n)
        if len(first) == n:
            return first
        if not first:
            raise StreamClosed(f"stream closed after 0 of {n} bytes")
        parts = bytearray(first)
        while len(parts) < n:
            chunk = await self.read(n - len(parts))
            if not chunk:
                raise StreamClosed(f"stream closed after {len(parts)} of {n} bytes")
            parts += chunk
        return bytes(parts)

    # -- output --------------------------------------------------------
    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            await self._can_send.wait()
            if self.closed:
                raise StreamClosed(self.service)
            chunk, view = view[: self.conn.max_payload], view[self.conn.max_payload :]
            self._can_send.clear()
            await self.conn.send(p.Message(p.A_WRTE, self.local_id, self.remote_id, bytes(chunk)))

    def _on_okay(self) -> None:
        self._can_send.set()

    # -- closing -------------------------------------------------------
    def on_close(self, callback: Callable[[], None]) -> None:
        self._on_close.append(callback)

    def _mark_closed(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._data.set()
        self._can_send.set()
        self.conn.streams.pop(self.local_id, None)
        for cb in self._on_close:
            try:
                cb()
            except Exception:  # noqa: BLE001 - a failing cleanup must not stop the others
                log.exception("close callback failed on %s", self.service)

    async def close(self) -> None:
        """Close from our side: wait for the last WRTE to be acknowledged, then CLSE."""
        if self.closed:
            return
        try:
            await asyncio.wait_for(self._can_send.wait(), timeout=10)
        except TimeoutError:
            pass
        if self.closed:
            return
        self._mark_closed()
        try:
            await self.conn.send(p.Message(p.A_CLSE, self.local_id, self.remote_id))
        except (ConnectionError, OSError):
            pass

    def host_closed(self) -> None:
        self._mark_closed()


Handler = Callable[[Stream, DeviceSpec], Awaitable[None]]
Resolver = Callable[[str], Handler | None]


class Connection:
    """The device side of one TCP connection from the adb server."""

    def __init__(
        self, spec: DeviceSpec, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, resolve: Resolver
    ):
        self.spec = spec
        self.reader = reader
        self.writer = writer
        self.resolve = resolve
        self.streams: dict[int, Stream] = {}
        self.max_payload = 4096
        self.online = False
        self._next_id = 1
        self._send_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()

    async def send(self, msg: p.Message) -> None:
        async with self._send_lock:
            self.writer.write(p.encode(msg))
            await self.writer.drain()

    async def serve(self) -> None:
        try:
            while True:
                msg = await p.read_message(self.reader)
                await self._dispatch(msg)
        except (asyncio.IncompleteReadError, ConnectionError, p.ProtocolError) as e:
            log.debug("%s: connection ends: %s", self.spec.name, e)
        finally:
            for stream in list(self.streams.values()):
                stream.host_closed()
            for task in list(self._tasks):
                task.cancel()
            self.writer.close()

    async def _dispatch(self, msg: p.Message) -> None:
        if msg.command == p.A_CNXN:
            await self._on_connect(msg)
        elif msg.command == p.A_AUTH:
            await self._on_auth(msg)
        elif not self.online:
            log.debug("%s: %s before the handshake ignored", self.spec.name, msg.name)
        elif msg.command == p.A_OPEN:
            await self._on_open(msg)
        elif msg.command == p.A_WRTE:
            stream = self.streams.get(msg.arg1)
            if stream is None:
                await self.send(p.Message(p.A_CLSE, 0, msg.arg0))
            else:
                await stream._on_write(msg.data)
        elif msg.command == p.A_OKAY:
            stream = self.streams.get(msg.arg1)
            if stream is not None:
                stream._on_okay()
        elif msg.command == p.A_CLSE:
            stream = self.streams.get(msg.arg1)
            if stream is not None:
                stream.host_closed()

    async def _on_connect(self, msg: p.Message) -> None:
        host_max = msg.arg1 or 4096
        self.max_payload = min(host_max, p.MAX_PAYLOAD)
        self.version = min(msg.arg0, p.VERSION)
        if self.spec.require_auth:
            await self._send_token()
            return
        self.online = True
        banner = p.make_banner(self.spec.banner_props(), FEATURES)
        await self.send(p.Message(p.A_CNXN, self.version, p.MAX_PAYLOAD, banner))

    async def _send_token(self) -> None:
        await self.send(p.Message(p.A_AUTH, p.AUTH_TOKEN, 0, os.urandom(20)))

    async def _on_auth(self, msg: p.Message) -> None:
        if not self.spec.require_auth:
            return
        if msg.arg0 == p.AUTH_SIGNATURE:
            # No key is ever accepted: ask again, so the host ends up offering its public key.
            await self._send_token()
        # AUTH_RSAPUBLICKEY: a real phone would show the prompt; nobody ever accepts it here.

    async def _on_open(self, msg: p.Message) -> None:
        service = msg.data.rstrip(b"\0").decode("utf-8", "replace")
        handler = self.resolve(service)
        if handler is None:
            log.info("%s: unsupported service %r", self.spec.name, service)
            await self.send(p.Message(p.A_CLSE, 0, msg.arg0))
            return
        local_id = self._next_id
        self._next_id += 1
        stream = Stream(self, local_id, msg.arg0, service)
        self.streams[local_id] = stream
        await self.send(p.Message(p.A_OKAY, local_id, msg.arg0))
        task = asyncio.create_task(self._run_handler(handler, stream))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_handler(self, handler: Handler, stream: Stream) -> None:
        try:
            await handler(stream, self.spec)
        except StreamClosed:
            pass
        except Exception:  # noqa: BLE001 - one broken service must not take the device down
            log.exception("%s: service %r failed", self.spec.name, stream.service)
        finally:
            await stream.close()
