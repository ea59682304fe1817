"""The one protocol surface every transport implements (run, stream, put, get, forward, close).

Layers above never care whether a device is reached over SSH, ADB or locally.
"""

from __future__ import annotations

import abc
import hashlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from edgelab.transport.forward import Forward
from edgelab.transport.quoting import Shell, join

Progress = Callable[[int, int], None]
"""Called with (bytes done, bytes total) during a transfer."""

PID_MARKER = "@@edgelab-pid "
_PID_LINE = re.compile(r"^@@edgelab-pid (\d+)$")


@dataclass(frozen=True)
class RunResult:
    """What a finished remote command left: exit code, decoded output, and time taken."""

    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class Endpoint:
    """How to reach one device; built from an inventory row, holds no secret."""

    name: str
    kind: str  # "ssh" | "adb" | "local"
    ssh_user: str | None = None
    ssh_host: str | None = None
    ssh_port: int | None = None
    ssh_jump: str | None = None
    adb_serial: str | None = None
    adb_server: str | None = None  # "host:port"; None = the local adb server
    host_key_fingerprint: str | None = None  # "SHA256:..." trusted by the operator
    shell: Shell = Shell.POSIX
    extra: dict[str, str] = field(default_factory=dict)


class RemoteProcess(abc.ABC):
    """A command running on a device whose output arrives line by line."""

    @abc.abstractmethod
    def lines(self) -> Iterator[str]:
        """Stdout lines (without the newline) as they arrive; ends when the process ends."""

    @abc.abstractmethod
    def cancel(self) -> None:
        """Kill the remote process and its process group; safe to call twice."""

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> int | None:
        """Exit code once finished, or None if still running after ``timeout``."""

    @property
    @abc.abstractmethod
    def stderr(self) -> str:
        """Stderr gathered so far."""

    def __enter__(self) -> RemoteProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class Transport(abc.ABC):
    """One connection to one device."""

    kind: str = "abstract"
    shell: Shell = Shell.POSIX

    @abc.abstractmethod
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        input: bytes | None = None,
    ) -> RunResult:
        """Run ``argv`` to completion; raise RemoteTimeout (after killing it) past ``timeout``."""

    @abc.abstractmethod
    def stream(self, argv: Sequence[str]) -> RemoteProcess:
        """Start ``argv`` and return a handle whose stdout arrives line by line."""

    @abc.abstractmethod
    def put(self, local: Path, remote: str, *, progress: Progress | None = None,
            offset: int | None = None) -> str | None:
        """Copy a local file to the device.

        ``offset`` None: the whole file, under ``remote`` only once complete; returns the SHA-256 of
        the bytes sent. ``offset`` given (resumable): ``remote`` already holds the file's first
        ``offset`` bytes (a partial the caller owns and checks); bytes ``[offset, size)`` are written
        after them in place, and a cut keeps what arrived; returns None (the caller verifies on the
        device). ``progress`` gets (bytes of the file on the device, its size).
        """

    @abc.abstractmethod
    def get(self, remote: str, local: Path, *, progress: Progress | None = None) -> str:
        """Copy a device file here; returns the SHA-256 of the bytes received."""

    def forward(self, remote_port: int) -> Forward:
        """A lab-side 127.0.0.1 port joined to ``remote_port`` on the device's loopback (close it after)."""
        raise NotImplementedError(f"{self.kind} transport cannot forward ports")

    def close(self) -> None:  # noqa: B027 - optional for transports that hold nothing
        """Release the connection."""

    def command_line(self, argv: Sequence[str]) -> str:
        """``argv`` quoted for this device's shell."""
        return join(argv, self.shell)

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def posix_stream_argv(argv: Sequence[str]) -> list[str]:
    """Wrap ``argv`` so the remote shell prints its pid first, then becomes the command.

    Over sshd and adbd the command runs as a process-group leader, so the pid
    names the group that ``posix_kill_argv`` kills on cancel.
    """
    return ["sh", "-c", f'echo "{PID_MARKER}$$"; exec "$@"', "edgelab-stream", *argv]


def parse_pid_line(line: str) -> int | None:
    m = _PID_LINE.match(line.strip())
    return int(m.group(1)) if m else None


def posix_kill_argv(pid: int, signal: str = "TERM") -> list[str]:
    """Kill a remote process group, falling back to the single process."""
    # No "--": dash's kill builtin rejects it; "-SIG -PID" means the group in dash, bash and mksh.
    script = f"kill -{signal} -{pid} 2>/dev/null || kill -{signal} {pid} 2>/dev/null; true"
    return ["sh", "-c", script]


class Deadline:
    """A timeout that several waits share."""

    def __init__(self, seconds: float | None):
        self.end = None if seconds is None else time.monotonic() + seconds

    def left(self) -> float | None:
        return None if self.end is None else max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return self.end is not None and time.monotonic() >= self.end
