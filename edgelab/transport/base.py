"""The one protocol surface every transport implements (run, stream, put, get, forward, close).

Layers above never care whether a device is reached over SSH, ADB or locally: what differs is
declared, not discovered. A transport class lists its optional abilities in ``capabilities``
(callers ask ``t.supports(Capability.X)``, never ``kind`` or ``hasattr``), and its connection knobs
are one typed record (``transport.options``) built in one place from the endpoint.

``put`` is resumable: with ``offset`` it continues a partial upload in place (see ``Transport.put``).
"""

from __future__ import annotations

import abc
import enum
import hashlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, overload

from edgelab.errors import TransportError
from edgelab.transport.forward import Forward
from edgelab.transport.quoting import Shell, join

Progress = Callable[[int, int], None]
"""Called with (bytes done, bytes total) during a transfer; for a resumed ``put`` ``done`` counts
from the start of the file (it begins above ``offset``), so a progress bar needs no arithmetic."""

Reachability = tuple[str, str | None]
"""``(state, detail)`` from ``Transport.check``: online, offline, untrusted, auth-failed,
unauthorized or absent, with one line saying why (None when online)."""


class Capability(enum.Flag):
    """Optional abilities a transport class declares in ``Transport.capabilities``.

    The layers above ask ``t.supports(...)``; a method behind a capability the class does not
    declare raises TransportError with a remedy.
    """

    NONE = 0
    FORWARD = enum.auto()
    """``forward(remote_port)``: a lab-side port joined to the device's loopback."""
    PROCESS_GROUPS = enum.auto()
    """``stream()``'s ``cancel`` kills the remote process group, not just the leader."""
    RESUMABLE_PUT = enum.auto()
    """``put(..., offset=N)`` continues a partial upload in place."""
    WINDOWS_SHELL = enum.auto()
    """``run_ps`` / ``stream_ps`` / ``run_line``: PowerShell scripts and raw lines for a Windows device
    (meaningful when ``shell is Shell.POWERSHELL``)."""
    INTERACTIVE = enum.auto()
    """``interactive()``: a terminal session (pty) for ``edgelab shell``."""
    FEED = enum.auto()
    """``run_fed(argv, local, offset)``: a command with a local file's bytes streamed on its stdin
    (one round trip for bytes and the command that stores them; ``feeds`` says whether this device can)."""


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

    @property
    def login_shell(self) -> Shell:
        """The shell commands meet on the device: adbd always runs Android's toybox ``sh``."""
        return Shell.TOYBOX if self.kind == "adb" else self.shell

    @classmethod
    def of_device(cls, row: Any) -> Endpoint:
        """From an inventory row: the ORM's ``Device`` or the ORM-free quick read of its table
        (anything with the ``device`` table's columns as attributes)."""
        return cls(
            name=row.name,
            kind=row.transport,
            ssh_user=row.ssh_user,
            ssh_host=row.ssh_host,
            ssh_port=row.ssh_port,
            ssh_jump=row.ssh_jump,
            adb_serial=row.adb_serial,
            adb_server=row.adb_server,
            host_key_fingerprint=row.host_key_fingerprint,
            shell=Shell(row.shell),
        )


@dataclass(frozen=True)
class TransportOptions:
    """Connection knobs every transport understands; each transport's record (``transport.options``)
    adds its own. ``timeout`` None means the transport's own default."""

    timeout: float | None = None

    def kwargs(self) -> dict[str, Any]:
        """The knobs that were set, as the transport's ``connect``/``check`` keyword arguments."""
        return {k: v for k, v in asdict(self).items() if v is not None}


class Interactive(abc.ABC):
    """A terminal session on a device (``edgelab shell``): raw bytes both ways until it ends."""

    @abc.abstractmethod
    def fileno(self) -> int:
        """A descriptor that polls readable when output (or the end) is waiting."""

    @abc.abstractmethod
    def recv(self, n: int) -> bytes:
        """Up to ``n`` bytes of output; b"" once the session ended."""

    @abc.abstractmethod
    def send(self, data: bytes) -> None:
        """Keystrokes for the remote side."""

    @abc.abstractmethod
    def exit_code(self) -> int:
        """The remote shell's exit status once it ended (0 when the transport cannot tell)."""

    @abc.abstractmethod
    def close(self) -> None:
        """End the session."""


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
    name: str = "device"
    shell: Shell = Shell.POSIX
    capabilities: ClassVar[Capability] = Capability.NONE
    last_put_via: str | None = None
    """How the last resumable ``put`` moved its bytes, for reports (e.g. ``openssh
    (aes128-gcm@openssh.com)``, ``sftp (paramiko; Windows endpoint)``); None when not said."""

    @classmethod
    def supports(cls, capability: Capability) -> bool:
        """Whether this transport class declared ``capability`` (all of them, for a combination);
        asked of an instance or of ``transport_class(kind)`` alike."""
        return capability in cls.capabilities

    def _lacks(self, what: str) -> TransportError:
        return TransportError(
            f"{self.name}: the {self.kind} transport cannot {what}",
            remedy="reach the device over a transport that can (see `edgelab device show`)",
        )

    @classmethod
    @abc.abstractmethod
    def open(cls, endpoint: Endpoint, options: TransportOptions) -> Transport:
        """A connected transport for ``endpoint`` (``transport.open_transport`` calls this)."""

    @classmethod
    def check(cls, endpoint: Endpoint, timeout: float = 5.0, **options: Any) -> Reachability:
        """Reachability as a state with a detail line; never raises for an unreachable device.

        ``options`` are the fields of this transport's options record (``transport.options``)."""
        return "online", None

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

    @overload
    def put(
        self, local: Path, remote: str, *, offset: None = None, progress: Progress | None = None
    ) -> str: ...

    @overload
    def put(self, local: Path, remote: str, *, offset: int, progress: Progress | None = None) -> None: ...

    def put(
        self, local: Path, remote: str, *, offset: int | None = None, progress: Progress | None = None
    ) -> str | None:
        """Copy a local file to the device.

        Without ``offset``: whole and atomic (written beside ``remote``, renamed into place, mode
        kept); returns the SHA-256 of the bytes sent.

        With ``offset`` (needs ``Capability.RESUMABLE_PUT``): bytes ``[offset, size)`` of ``local``
        are written into ``remote`` itself at their own offsets, ``remote`` created when ``offset``
        is 0 and truncated to ``offset`` otherwise (the first ``offset`` bytes are taken to be there,
        from an earlier cut put). Nothing is renamed, so a cut leaves ``remote`` holding a prefix
        whose size is where the next try resumes; the caller owns that file (typically a ``.part``
        the device hashes and renames). Returns None: the bytes are verified on the device, not here.
        ``progress`` gets ``(position in the file, size)``. A cut raises TransportError.
        """
        if offset is None:
            return self._put_whole(Path(local), remote, progress)
        if not self.supports(Capability.RESUMABLE_PUT):
            raise self._lacks("resume an upload")
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        self._put_from(Path(local), remote, offset, progress)
        return None

    @abc.abstractmethod
    def _put_whole(self, local: Path, remote: str, progress: Progress | None) -> str:
        """``put`` without an offset (see there)."""

    def _put_from(self, local: Path, remote: str, offset: int, progress: Progress | None) -> None:
        """``put`` with an offset (see there); only transports with RESUMABLE_PUT implement it."""
        raise self._lacks("resume an upload")

    @property
    def memo(self) -> dict[str, Any]:
        """Facts about the device worth asking once per connection (the store's root and hasher):
        this instance's own dict; a transport whose instances share a pooled connection shares it."""
        memo = self.__dict__.get("_memo")
        if memo is None:
            memo = self.__dict__["_memo"] = {}
        return memo

    def prepare_put(self) -> None:  # noqa: B027 - a hint: nothing to do for most transports
        """A hint that a resumable ``put`` is likely soon: a transport may start what it needs now
        (SSH starts its OpenSSH client's connection), so that set-up overlaps the caller's other
        round trips. A put that never comes costs that idle set-up, ended after a while or at exit."""

    @abc.abstractmethod
    def get(self, remote: str, local: Path, *, progress: Progress | None = None) -> str:
        """Copy a device file here; returns the SHA-256 of the bytes received."""

    def read_bytes(
        self, remote: str, offset: int = 0, max_bytes: int | None = None, *, tail: bool = False
    ) -> bytes:
        """Bytes of a device file from ``offset`` (or its last ``max_bytes`` with ``tail``); b'' when
        it is absent. For hosts whose shell cannot print a file's bytes (Windows: read over SFTP)."""
        raise self._lacks("read a file's bytes")

    def forward(self, remote_port: int) -> Forward:
        """A lab-side 127.0.0.1 port joined to ``remote_port`` on the device's loopback (close it after)."""
        raise NotImplementedError(f"{self.kind} transport cannot forward ports")

    # -- behind optional capabilities ---------------------------------------------------------

    def run_ps(self, script: str, *, timeout: float = 60.0, label: str | None = None) -> RunResult:
        """Run a PowerShell script (from ``winscripts``) on a Windows device (WINDOWS_SHELL)."""
        raise self._lacks("run PowerShell")

    def stream_ps(self, script: str) -> RemoteProcess:
        """Stream a PowerShell script's output; cancel kills its process tree (WINDOWS_SHELL)."""
        raise self._lacks("run PowerShell")

    def run_line(
        self, line: str, *, timeout: float = 60.0, input: bytes | None = None, label: str | None = None
    ) -> RunResult:
        """Run a line already quoted for the device's login shell, as is (WINDOWS_SHELL)."""
        raise self._lacks("run a raw command line")

    @property
    def feeds(self) -> bool:
        """Whether ``run_fed`` works on this device (FEED, and whatever the device must have for it)."""
        return self.supports(Capability.FEED)

    def run_fed(
        self,
        argv: Sequence[str],
        local: Path,
        *,
        offset: int = 0,
        progress: Progress | None = None,
        timeout: float = 60.0,
    ) -> RunResult:
        """Run ``argv`` with bytes ``[offset, size)`` of ``local`` on its stdin, streamed (FEED).

        ``progress`` gets (position in ``local``, size); ``timeout``: how long the command may run
        on after its last input byte. A cut connection raises TransportError."""
        raise self._lacks("stream a file into a command")

    def interactive(self, *, term: str, columns: int, lines: int) -> Interactive:
        """A terminal session sized ``columns`` x ``lines`` with ``$TERM`` = ``term`` (INTERACTIVE)."""
        raise self._lacks("open an interactive shell")

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
