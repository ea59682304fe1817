"""Port forwarding: a lab-side ``127.0.0.1`` port that reaches a port on the device's loopback.

A lab-side client (the llama-server adapter, a vLLM-Omni speech client, an OpenPI client) talks to
a server that listens on a device's loopback only. ``Transport.forward(remote_port)`` returns a
:class:`Forward`: its ``local_port`` is where to connect here; ``close()`` (or leaving the
``with`` block) stops the listener and every connection through it.

SSH opens one ``direct-tcpip`` channel per accepted connection (what ``ssh -L`` does); ADB asks
the device's adb server for ``forward tcp:0 tcp:PORT`` (what ``adb forward`` does), so the adb
server opens the device's ``tcp:PORT`` service; local needs nothing.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class Forward:
    """One forwarded port; ``local_port`` is on 127.0.0.1 of the lab host."""

    def __init__(self, local_port: int, remote_port: int, on_close: Callable[[], None] | None = None):
        self.local_port = local_port
        self.remote_port = remote_port
        self._on_close = on_close
        self.closed = False

    @property
    def url_host(self) -> str:
        return f"127.0.0.1:{self.local_port}"

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._on_close is not None:
            self._on_close()

    def __enter__(self) -> Forward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _pump(src: Any, dst: Any, done: threading.Event) -> None:
    try:
        while not done.is_set():
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except (OSError, EOFError) as e:
        log.debug("forward pump ends: %s", e)
    finally:
        with contextlib.suppress(OSError, EOFError):
            dst.shutdown(socket.SHUT_WR) if isinstance(dst, socket.socket) else dst.shutdown_write()


class ListenerForward(Forward):
    """A listening socket whose every connection is joined to ``open_remote()`` (a socket-like channel)."""

    def __init__(
        self, remote_port: int, open_remote: Callable[[tuple[str, int]], Any], name: str = "forward"
    ):
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        super().__init__(self._sock.getsockname()[1], remote_port, self._shutdown)
        self._open_remote = open_remote
        self._done = threading.Event()
        self._conns: list[tuple[Any, Any]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name=f"{name}-{remote_port}", daemon=True).start()

    def _accept(self) -> None:
        while not self._done.is_set():
            try:
                client, peer = self._sock.accept()
            except OSError:
                return
            with contextlib.suppress(OSError):  # small SSE writes must not wait for Nagle
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                remote = self._open_remote(peer)
            except Exception as e:  # noqa: BLE001 - the device refused: this one connection fails
                log.info("forward to device port %s refused: %s", self.remote_port, e)
                client.close()
                continue
            with self._lock:
                self._conns.append((client, remote))
            for a, b in ((client, remote), (remote, client)):
                threading.Thread(target=_pump, args=(a, b, self._done), daemon=True).start()

    def _shutdown(self) -> None:
        self._done.set()
        with contextlib.suppress(OSError):
            self._sock.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for a, b in conns:
            for s in (a, b):
                with contextlib.suppress(OSError, EOFError):
                    s.close()
