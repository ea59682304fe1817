"""Run an asyncio WebSocket server in a background thread on a loopback port, and stop it.

Lab-side servers live beside synchronous callers (tests, the CLI), so each owns its event loop
in a thread; ``stop()`` closes the listener and every connection before returning.
"""

from __future__ import annotations

import asyncio
import ipaddress
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from websockets.asyncio.server import ServerConnection, serve

from edgelab.errors import ConfigError


def check_loopback(host: str) -> None:
    """Lab-side test servers never listen beyond this machine."""
    try:
        ok = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(
            f"refusing to listen on {host!r}", remedy="bind a loopback address such as 127.0.0.1"
        )


class BackgroundServer:
    """A ``websockets`` server on ``host``:``port`` (0 = a free port) served by a daemon thread."""

    def __init__(
        self,
        handler: Callable[[ServerConnection], Awaitable[None]],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        process_request: Callable[..., Any] | None = None,
    ):
        check_loopback(host)
        self._handler = handler
        self._host, self._port = host, port
        self._process_request = process_request
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        return f"ws://{self._host}:{self.port}"

    def start(self) -> BackgroundServer:
        self._thread = threading.Thread(target=self._main, name=f"ws-server-{self._host}", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        if self.port is None:
            raise RuntimeError("server did not start within 30 s")
        return self

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as err:  # reported to start()
            self._error = err
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        async with serve(
            self._handler, self._host, self._port, process_request=self._process_request, max_size=None
        ) as server:
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            await self._stopping.wait()
            server.close(close_connections=True)
            await server.wait_closed()

    def stop(self) -> None:
        """Close the listener and connections; safe to call twice."""
        if self._loop is not None and self._stopping is not None and self._thread is not None:
            if self._thread.is_alive():
                self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join(30)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def iterate_in_thread(make: Callable[[], Iterator[Any]]) -> AsyncIterator[Any]:
    """Items of a blocking iterator (numpy compute, paced sleeps) run in a worker thread."""
    loop = asyncio.get_running_loop()
    q: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def work() -> None:
        try:
            for item in make():
                loop.call_soon_threadsafe(q.put_nowait, ("item", item))
        except BaseException as err:
            loop.call_soon_threadsafe(q.put_nowait, ("error", err))
        else:
            loop.call_soon_threadsafe(q.put_nowait, ("end", None))

    th = threading.Thread(target=work, name="compute", daemon=True)
    th.start()
    while True:
        kind, value = await q.get()
        if kind == "end":
            return
        if kind == "error":
            raise value
        yield value


INVALID = (
    "__invalid__"  # an Inbox item for a text message that is not a JSON object ("reason": json | object)
)


class Inbox:
    """Reads a connection's messages in the background: JSON text as dicts, binary as bytes,
    None once closed. Lets a session stream while still hearing ``input.cancel``."""

    def __init__(self, ws: ServerConnection):
        self.ws = ws
        self._q: asyncio.Queue[dict[str, Any] | bytes | None] = asyncio.Queue()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        import json

        from websockets.exceptions import ConnectionClosed

        try:
            async for msg in self.ws:
                if isinstance(msg, bytes):
                    await self._q.put(msg)
                    continue
                try:
                    d = json.loads(msg)
                except ValueError:
                    await self._q.put({"type": INVALID, "raw": msg[:200], "reason": "json"})
                    continue
                await self._q.put(
                    d if isinstance(d, dict) else {"type": INVALID, "raw": msg[:200], "reason": "object"}
                )
        except ConnectionClosed:
            pass
        finally:
            await self._q.put(None)

    async def get(self) -> dict[str, Any] | bytes | None:
        return await self._q.get()

    def close(self) -> None:
        self._task.cancel()
