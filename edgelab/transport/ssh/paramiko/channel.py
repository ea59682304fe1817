"""SSH channel plumbing: pumping a command's stdout/stderr, its exit status, a streamed process.

A channel's two streams are read on two threads so neither can block the other; the first stdout
line may be the pid marker a streamed command prints (``base.posix_stream_argv``), which is how a
cancel reaches the remote process group.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from queue import Queue
from typing import Protocol, cast

import paramiko

from edgelab.transport.base import Deadline, Interactive, RemoteProcess, parse_pid_line

COPY_CHUNK = 1 << 20
KILL_GRACE_S = 2.0


class ProcessOwner(Protocol):
    """What a streamed process needs from its transport: the timeout and a way to kill it."""

    timeout: float

    def _terminate(self, chan: paramiko.Channel, pump: Pump) -> None: ...


class Pump:
    """Reads a channel's stdout and stderr on two threads, so neither side can block the other."""

    def __init__(self, chan: paramiko.Channel, on_line: Callable[[bytes], None] | None = None) -> None:
        self.chan = chan
        self.out = bytearray()
        self.err = bytearray()
        self.pid: int | None = None
        self.pid_known = threading.Event()
        self._on_line = on_line
        self._threads = [
            threading.Thread(target=self._read_out, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for th in self._threads:
            th.start()

    def _read_out(self) -> None:
        pending = b""
        first = True
        try:
            while data := self.chan.recv(COPY_CHUNK):
                if self._on_line is None and not first:
                    self.out += data
                    continue
                pending += data
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    if first:
                        first = False
                        pid = parse_pid_line(line.decode("utf-8", "replace"))
                        if pid is not None:
                            self.pid = pid
                            self.pid_known.set()
                            continue
                        self.pid_known.set()
                    if self._on_line is not None:
                        self._on_line(line)
                    else:
                        self.out += line + b"\n"
                if self._on_line is None and not first:
                    self.out += pending
                    pending = b""
        except (OSError, EOFError, paramiko.SSHException):
            pass
        finally:
            if pending:
                if self._on_line is not None:
                    self._on_line(pending)
                else:
                    self.out += pending
            self.pid_known.set()

    def _read_err(self) -> None:
        try:
            while data := self.chan.recv_stderr(COPY_CHUNK):
                self.err += data
        except (OSError, EOFError, paramiko.SSHException):
            pass

    def join(self, timeout: float | None) -> bool:
        deadline = Deadline(timeout)
        for th in self._threads:
            th.join(deadline.left())
        return not any(th.is_alive() for th in self._threads)

    @property
    def done(self) -> bool:
        return not any(th.is_alive() for th in self._threads)


def exit_code(chan: paramiko.Channel, timeout: float | None) -> int:
    """The remote exit status; -1 when the process died of a signal (sshd sends no status then)."""
    chan.status_event.wait(timeout)
    return chan.exit_status if chan.exit_status_ready() else -1


def feed(chan: paramiko.Channel, data: bytes) -> None:
    try:
        chan.sendall(data)
        chan.shutdown_write()
    except (OSError, EOFError, paramiko.SSHException):
        pass


_EOF = object()


class SSHProcess(RemoteProcess):
    """A remote command whose stdout lines arrive through a queue fed by the channel reader."""

    def __init__(self, transport: ProcessOwner, chan: paramiko.Channel) -> None:
        self._t = transport
        self._chan = chan
        self._queue: Queue[object] = Queue()
        self._cancelled = False
        self._pump = Pump(chan, on_line=self._queue.put)
        chan.shutdown_write()
        threading.Thread(target=self._mark_eof, daemon=True).start()

    def _mark_eof(self) -> None:
        self._pump.join(None)
        self._queue.put(_EOF)

    @property
    def pid(self) -> int | None:
        """The remote pid (process-group leader), once its marker line has arrived."""
        self._pump.pid_known.wait(self._t.timeout)
        return self._pump.pid

    def lines(self) -> Iterator[str]:
        while (item := self._queue.get()) is not _EOF:
            yield cast(bytes, item).decode("utf-8", "replace").rstrip("\r")
        self._queue.put(_EOF)  # a second lines() call ends at once

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        if not self._pump.done:
            self._t._terminate(self._chan, self._pump)
        self._chan.close()

    def wait(self, timeout: float | None = None) -> int | None:
        if not self._pump.join(timeout):
            return None
        deadline = 5.0 if timeout is None else max(0.5, timeout)
        return exit_code(self._chan, deadline)

    @property
    def stderr(self) -> str:
        return bytes(self._pump.err).decode("utf-8", "replace")


class SSHInteractive(Interactive):
    """A session channel with a pty running the login shell (``edgelab shell``)."""

    def __init__(self, chan: paramiko.Channel) -> None:
        self._chan = chan

    def fileno(self) -> int:
        return self._chan.fileno()

    def recv(self, n: int) -> bytes:
        return self._chan.recv(n)

    def send(self, data: bytes) -> None:
        self._chan.sendall(data)

    def exit_code(self) -> int:
        return self._chan.recv_exit_status() if self._chan.exit_status_ready() else 0

    def close(self) -> None:
        self._chan.close()
