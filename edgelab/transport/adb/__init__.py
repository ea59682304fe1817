"""Android devices through an adb server (the local one, or ``host:port`` of another lab host).

Each operation is one adb service on its own socket, as the adb CLI does it:
``shell,v2,raw:`` for commands (real exit codes, stderr apart; v1 with an
exit marker only where a device lacks shell_v2), ``sync:`` for files in
64 KiB DATA packets, and shell v2 stdin for a resumable put (``adb_push``). Closing a shell socket makes adbd end the command; for
timeouts and cancels we also kill the command's process group by its pid,
which ``posix_stream_argv`` prints first.
"""

from __future__ import annotations

import hashlib
import os
import queue
import select
import socket
import stat
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from edgelab.errors import DeviceNotAnswering, DeviceStateError, HostKeyError, RemoteTimeout, TransportError
from edgelab.transport.adb import (
    push as adb_push,  # the package holds the transport; push, server, tunnel beside it
)
from edgelab.transport.adb.server import (
    host_query,
    is_remote,
    is_tunnel,
    list_devices,
    not_answering,
    open_server,
    open_transport,
    read_block,
    recv_exact,
    send_request,
)
from edgelab.transport.base import (
    Capability,
    Deadline,
    Endpoint,
    Interactive,
    Progress,
    Reachability,
    RemoteProcess,
    RunResult,
    Transport,
    TransportOptions,
    parse_pid_line,
    posix_kill_argv,
    posix_stream_argv,
)
from edgelab.transport.forward import Forward
from edgelab.transport.quoting import Shell, join

SYNC_DATA_MAX = 64 * 1024
_SYNC = struct.Struct("<4sI")
_STAT_V1 = struct.Struct("<IIII")  # after the id: mode, size, mtime (id read apart)
_V2 = struct.Struct("<BI")
ID_STDIN, ID_STDOUT, ID_STDERR, ID_EXIT, ID_CLOSE_STDIN = range(5)
_EXIT_MARKER = "@@edgelab-exit "
_IO_IDLE_S = 60.0  # a transfer that sees no byte for this long has stalled
_STREAM_IDLE_S = 15.0  # a stream silent this long asks the device whether it still answers

REMEDIES = {
    "unauthorized": "accept the USB debugging prompt on the device (and tick 'always allow'), then check again",
    "offline": "reconnect it: `adb disconnect SERIAL && adb connect SERIAL`, or replug the USB cable",
    "absent": "plug it in, or `adb connect SERIAL` for a network device; check the --adb-server address",
    "authorizing": "wait a moment, or accept the USB debugging prompt on the device",
    "connecting": "wait a moment and check again",
    "no permissions": "fix the udev rules for the device on the lab host (see `adb devices`)",
}


def list_adb_devices(adb_server: str | None) -> list[tuple[str, str]]:
    """(serial, state) for every device the adb server sees (``device import adb``)."""
    return list_devices(adb_server)


def _state_error(name: str, serial: str, state: str, server: str | None) -> DeviceStateError:
    where = f" on adb server {server}" if server else ""
    remedy = REMEDIES.get(state, "check `adb devices` on the lab host").replace("SERIAL", serial)
    return DeviceStateError(f"{name}: adb device {serial}{where} is {state}", remedy=remedy)


class _ShellChannel:
    """One shell v2 conversation: packets in, packets out."""

    def __init__(self, sock: socket.socket):
        self.sock = sock

    def send(self, kind: int, data: bytes = b"") -> None:
        self.sock.sendall(_V2.pack(kind, len(data)) + data)

    def recv(self, idle_s: float | None = None) -> tuple[int, bytes] | None:
        """The next packet; TimeoutError when none began within ``idle_s`` (nothing half read)."""
        if idle_s is not None and not select.select([self.sock], [], [], idle_s)[0]:
            raise TimeoutError("no packet")
        try:
            header = recv_exact(self.sock, _V2.size)
        except EOFError:
            return None
        kind, length = _V2.unpack(header)
        return kind, recv_exact(self.sock, length) if length else b""

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class ADBProcess(RemoteProcess):
    """A streamed command: a reader thread splits stdout into lines and keeps stderr."""

    def __init__(self, transport: ADBTransport, chan: _ShellChannel):
        self._t = transport
        self._chan = chan
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr = bytearray()
        self._exit: int | None = None
        self._done = threading.Event()
        self._cancelled = False
        self._pid_ready = threading.Event()
        self.pid: int | None = None
        self._thread = threading.Thread(target=self._read, name="adb-stream", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        buf = b""
        first = True
        try:
            while True:
                try:
                    pkt = self._chan.recv(_STREAM_IDLE_S)
                except TimeoutError:  # a quiet stream, or a frozen device: the device says which
                    if self._cancelled or not self._t.answers():
                        self._stderr += f"edgelab: {self._t.name} stopped answering; stream ended\n".encode()
                        self._chan.close()  # once it thaws, the device ends the group of a closed stream
                        break
                    continue
                if pkt is None:
                    break
                kind, data = pkt
                if kind == ID_STDOUT:
                    buf += data
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        text = line.decode("utf-8", "replace").rstrip("\r")
                        if first:
                            first = False
                            self.pid = parse_pid_line(text)
                            self._pid_ready.set()
                            if self.pid is not None:
                                continue
                        self._lines.put(text)
                elif kind == ID_STDERR:
                    self._stderr += data
                elif kind == ID_EXIT:
                    self._exit = data[0] if data else 255
                    break
        except (OSError, EOFError):
            pass
        finally:
            if buf:
                self._lines.put(buf.decode("utf-8", "replace").rstrip("\r"))
            self._pid_ready.set()
            self._lines.put(None)
            self._done.set()

    def lines(self) -> Iterator[str]:
        while (line := self._lines.get()) is not None:
            yield line
        self._lines.put(None)  # a second iteration ends at once too

    def wait(self, timeout: float | None = None) -> int | None:
        self._done.wait(timeout)
        return self._exit if self._done.is_set() else None

    @property
    def stderr(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        if not self._done.is_set():
            self._pid_ready.wait(5.0)
            if self.pid is not None:
                self._t._kill(self.pid, "TERM")
                if not self._done.wait(2.0):
                    self._t._kill(self.pid, "KILL")
        self._chan.close()  # adbd (and our emulator) also end the group when the stream closes
        self._done.wait(5.0)


class _ShellSession(Interactive):
    """adbd's ``shell:`` service: a pty on a real device, raw bytes both ways."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def fileno(self) -> int:
        return self._sock.fileno()

    def recv(self, n: int) -> bytes:
        return self._sock.recv(n)

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def exit_code(self) -> int:
        return 0  # the v1 shell service reports no exit status

    def close(self) -> None:
        self._sock.close()


class ADBTransport(Transport):
    kind = "adb"
    shell = Shell.TOYBOX
    capabilities = (
        Capability.FORWARD
        | Capability.PROCESS_GROUPS
        | Capability.INTERACTIVE
        | Capability.RESUMABLE_PUT
        | Capability.FEED
    )

    def __init__(self, endpoint: Endpoint, features: set[str], timeout: float = 10.0):
        if not endpoint.adb_serial:
            raise TransportError(
                f"{endpoint.name} has no adb serial", remedy="set one with `edgelab device add --adb`"
            )
        self.endpoint = endpoint
        self.name = endpoint.name
        self.serial = endpoint.adb_serial
        self.server = endpoint.adb_server
        self.features = features
        self.timeout = timeout

    # -- connecting ----------------------------------------------------------
    @classmethod
    def device_state(cls, endpoint: Endpoint, timeout: float = 5.0) -> str:
        """adb's word for the device (device, offline, unauthorized, ...), or "absent"."""
        for serial, state in list_devices(endpoint.adb_server, timeout):
            if serial == endpoint.adb_serial:
                return state
        return "absent"

    @classmethod
    def open(cls, endpoint: Endpoint, options: TransportOptions) -> ADBTransport:
        return cls.connect(endpoint, **options.kwargs())

    @classmethod
    def connect(cls, endpoint: Endpoint, *, timeout: float = 10.0) -> ADBTransport:
        try:
            state = cls.device_state(endpoint, timeout)
        except HostKeyError as e:  # the SSH host of an ssh:// adb server
            from edgelab.transport.adb.tunnel import for_device

            raise for_device(e, endpoint.name) from None
        if state != "device":
            raise _state_error(endpoint.name, endpoint.adb_serial or "?", state, endpoint.adb_server)
        features = host_query(endpoint.adb_server, f"host-serial:{endpoint.adb_serial}:features", timeout)
        return cls(endpoint, {f for f in features.strip().split(",") if f}, timeout)

    @classmethod
    def check(cls, endpoint: Endpoint, timeout: float = 5.0, **options: Any) -> Reachability:
        """("online"|"offline"|"unauthorized"|"absent", detail) without raising for an unreachable device."""
        try:
            state = cls.device_state(endpoint, timeout)
        except HostKeyError as e:  # the SSH host of an ssh:// adb server is not trusted (yet)
            from edgelab.transport.adb.tunnel import for_device

            return "untrusted", str(for_device(e, endpoint.name))
        except TransportError as e:
            if is_tunnel(endpoint.adb_server):
                from edgelab.transport.adb.tunnel import auth_failed

                if auth_failed(e):
                    return "auth-failed", str(e)
            return "offline", str(e)
        if state == "device":
            try:
                t = cls.connect(endpoint, timeout=timeout)
                r = t.run(["echo", "ok"], timeout=timeout)
                if r.stdout.strip() == "ok":
                    return "online", f"adb {endpoint.adb_serial}"
                return "offline", f"shell answered {r.exit_code}: {r.stderr.strip()[:200]}"
            except TransportError as e:
                return "offline", str(e)
        if state in ("unauthorized", "offline", "absent"):
            return state, _state_error(
                endpoint.name, endpoint.adb_serial or "?", state, endpoint.adb_server
            ).remedy
        return "offline", f"adb reports {state}"

    @property
    def shell_v2(self) -> bool:
        return "shell_v2" in self.features

    def _open(self, service: str, timeout: float | None) -> socket.socket:
        try:
            sock = open_transport(self.server, self.serial, service, timeout=self.timeout)
        except DeviceNotAnswering:
            raise self._frozen(service.split(":", 1)[0].split(",", 1)[0]) from None
        except TransportError as e:
            if "not found" in str(e) or "offline" in str(e) or "unauthorized" in str(e):
                state = self.device_state(self.endpoint)
                raise _state_error(self.name, self.serial, state, self.server) from None
            raise
        sock.settimeout(timeout)
        return sock

    # -- commands ----------------------------------------------------------
    def run(self, argv: Sequence[str], *, timeout: float = 60.0, input: bytes | None = None) -> RunResult:
        argv = [str(a) for a in argv]
        if not self.shell_v2:
            return self._run_v1(argv, timeout, input)
        start = time.monotonic()
        deadline = Deadline(timeout)
        chan = _ShellChannel(
            self._open("shell,v2,raw:" + join(posix_stream_argv(argv), Shell.TOYBOX), timeout)
        )
        out, err = bytearray(), bytearray()
        code: int | None = None
        try:
            if input:
                for i in range(0, len(input), SYNC_DATA_MAX):
                    chan.send(ID_STDIN, input[i : i + SYNC_DATA_MAX])
            chan.send(ID_CLOSE_STDIN)
            while True:
                chan.sock.settimeout(max(deadline.left() or 0.0, 0.001))
                pkt = chan.recv()
                if pkt is None:
                    break
                kind, data = pkt
                if kind == ID_STDOUT:
                    out += data
                elif kind == ID_STDERR:
                    err += data
                elif kind == ID_EXIT:
                    code = data[0] if data else 255
                    break
        except TimeoutError:
            pid = parse_pid_line(bytes(out).split(b"\n", 1)[0].decode("utf-8", "replace"))
            chan.close()
            if pid is None or not self._kill(pid, "KILL"):
                # no pid line, or the kill itself went unanswered: the device, not the command, hangs
                raise self._frozen(argv[0], timeout) from None
            raise RemoteTimeout(
                f"{argv[0]} ran past {timeout:g}s on {self.name} and was killed",
                remedy="raise the timeout or check the device's load",
            ) from None
        except OSError as e:
            raise TransportError(f"{self.name}: adb shell failed: {e}") from None
        finally:
            chan.close()
        if code is None:
            raise TransportError(
                f"{self.name}: the shell ended without an exit status",
                remedy="check the device with `adb devices`",
            )
        text = bytes(out).decode("utf-8", "replace")
        first, sep, rest = text.partition("\n")
        if parse_pid_line(first) is not None:
            text = rest
        return RunResult(
            tuple(argv), code, text, bytes(err).decode("utf-8", "replace"), time.monotonic() - start
        )

    def _run_v1(self, argv: list[str], timeout: float, input: bytes | None) -> RunResult:
        """Old devices: stdout and stderr arrive mixed; the exit code comes from a marker line."""
        start = time.monotonic()
        cmd = join(argv, Shell.TOYBOX) + f'; echo "{_EXIT_MARKER}$?"'
        sock = self._open("shell:" + cmd, timeout)
        data = bytearray()
        try:
            if input:
                sock.sendall(input)
            deadline = Deadline(timeout)
            while True:
                sock.settimeout(max(deadline.left() or 0.0, 0.001))
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            if not data:
                raise self._frozen(argv[0], timeout) from None
            raise RemoteTimeout(
                f"{argv[0]} ran past {timeout:g}s on {self.name}", remedy="raise the timeout"
            ) from None
        except OSError as e:
            raise TransportError(f"{self.name}: adb shell failed: {e}") from None
        finally:
            sock.close()
        text = bytes(data).decode("utf-8", "replace").replace("\r\n", "\n")
        body, sep, tail = text.rpartition(_EXIT_MARKER)
        if not sep:
            raise TransportError(f"{self.name}: no exit status from the shell")
        return RunResult(tuple(argv), int(tail.strip() or 255), body, "", time.monotonic() - start)

    def _kill(self, pid: int, signal: str) -> bool:
        """Best effort; False when the device did not take the kill (unreachable, not answering)."""
        try:
            self.run(posix_kill_argv(pid, signal), timeout=10.0)
            return True
        except TransportError:
            return False

    def answers(self, timeout: float = 10.0) -> bool:
        """Whether the device runs a trivial command within ``timeout`` (a frozen one does not)."""
        try:
            return self.run(["true"], timeout=timeout).ok
        except TransportError:
            return False

    def _frozen(self, doing: str, timeout: float | None = None) -> DeviceNotAnswering:
        return not_answering(self.serial, self.server, timeout or self.timeout, self.name, doing)

    def _io_error(self, what: str, e: BaseException) -> TransportError:
        """A socket fault during a transfer: a timeout means the device stopped answering."""
        if isinstance(e, TimeoutError):
            return self._frozen(what, _IO_IDLE_S)
        return TransportError(f"{what} failed: {e}")

    def stream(self, argv: Sequence[str]) -> RemoteProcess:
        if not self.shell_v2:
            raise TransportError(f"{self.name} has no shell_v2", remedy="streaming needs Android 7 or newer")
        cmd = join(posix_stream_argv([str(a) for a in argv]), Shell.TOYBOX)
        chan = _ShellChannel(self._open("shell,v2,raw:" + cmd, _IO_IDLE_S))  # a packet stalled midway: cut
        chan.send(ID_CLOSE_STDIN)
        return ADBProcess(self, chan)

    # -- files ---------------------------------------------------------------
    @staticmethod
    def _sync_fail(sock: socket.socket, length: int) -> str:
        return recv_exact(sock, length).decode("utf-8", "replace")

    def _open_service(self, service: str, timeout: float | None) -> socket.socket:
        return self._open(service, timeout)

    def _put_whole(self, local: Path, remote: str, progress: Progress | None) -> str:
        """One sync SEND, adbd's own atomic write (the file appears at DONE); the SHA-256 sent."""
        h = hashlib.sha256()
        self._files(
            lambda: adb_push.sync_send(
                self._open_service,
                local,
                remote,
                progress=progress,
                digest=h,
                name=self.name,
                idle_s=_IO_IDLE_S,
            ),
            remote,
        )
        return h.hexdigest()

    def _put_from(self, local: Path, remote: str, offset: int, progress: Progress | None) -> None:
        """Appended through shell v2 stdin (``adb_push.append``): a cut keeps what arrived, and the
        file grows while the bytes arrive. Without shell_v2 only a whole SEND (offset 0) is possible."""
        if self.shell_v2:
            self.last_put_via = "adb shell v2 stdin (cat >> FILE)"
            self._files(
                lambda: adb_push.append(
                    self._open_service,
                    local,
                    remote,
                    offset,
                    progress=progress,
                    name=self.name,
                    idle_s=_IO_IDLE_S,
                ),
                remote,
            )
        elif offset == 0:
            self.last_put_via = "adb sync SEND (no shell_v2)"
            self._files(
                lambda: adb_push.sync_send(
                    self._open_service, local, remote, progress=progress, name=self.name, idle_s=_IO_IDLE_S
                ),
                remote,
            )
        else:
            raise TransportError(
                f"{self.name} has no shell_v2: cannot resume {remote} at {offset}",
                remedy="upload from offset 0",
            )

    @property
    def feeds(self) -> bool:
        return self.shell_v2  # stdin packets and an exit status: shell v2 (Android 7+)

    def run_fed(
        self,
        argv: Sequence[str],
        local: Path,
        *,
        offset: int = 0,
        progress: Progress | None = None,
        timeout: float = 60.0,
    ) -> RunResult:
        """One shell v2 service: the bytes go in as stdin packets while the command runs
        (``adb_push.feed``); its exit code, stdout and stderr come back on the same stream."""
        argv = [str(a) for a in argv]
        if not self.shell_v2:
            raise TransportError(f"{self.name} has no shell_v2", remedy="this needs Android 7 or newer")
        start = time.monotonic()
        box: list[tuple[int | None, str, str]] = []
        self._files(
            lambda: box.append(
                adb_push.feed(
                    self._open_service,
                    Path(local),
                    join(argv, Shell.TOYBOX),
                    offset,
                    progress=progress,
                    name=self.name,
                    idle_s=_IO_IDLE_S,
                    answer_s=timeout,
                )
            ),
            argv[0],
        )
        self.last_put_via = "adb shell v2 stdin, into the command that stores the bytes"
        code, out, err = box[0]
        if code is None:
            raise TransportError(f"{self.name}: {argv[0]} ended without an exit status: {err.strip()[:200]}")
        return RunResult(tuple(argv), code, out, err, time.monotonic() - start)

    def _files(self, transfer, remote: str) -> None:
        where = f"push to {self.name}:{remote}"
        try:
            transfer()
        except OSError as e:
            raise self._io_error(where, e) from None
        except EOFError as e:
            raise TransportError(f"{where} cut: {e}") from None

    def get(self, remote: str, local: Path, *, progress: Progress | None = None) -> str:
        local = Path(local)
        sock = self._open("sync:", _IO_IDLE_S)
        h = hashlib.sha256()
        tmp = local.with_name(local.name + ".edgelab-part")
        try:
            path = remote.encode()
            sock.sendall(_SYNC.pack(b"STAT", len(path)) + path)
            ident = recv_exact(sock, 4)
            mode, size, _mtime = struct.unpack("<III", recv_exact(sock, 12))
            if ident != b"STAT":
                raise TransportError(f"pull from {self.name}: unexpected sync reply {ident!r}")
            if mode == 0:
                raise TransportError(f"{remote}: no such file on {self.name}")
            if stat.S_ISDIR(mode):
                raise TransportError(f"{remote} is a directory on {self.name}")
            sock.sendall(_SYNC.pack(b"RECV", len(path)) + path)
            local.parent.mkdir(parents=True, exist_ok=True)
            done = 0
            with open(tmp, "wb") as f:
                while True:
                    ident, length = _SYNC.unpack(recv_exact(sock, _SYNC.size))
                    if ident == b"DATA":
                        block = recv_exact(sock, length)
                        f.write(block)
                        h.update(block)
                        done += len(block)
                        if progress:
                            progress(done, size)
                    elif ident == b"DONE":
                        break
                    elif ident == b"FAIL":
                        raise TransportError(
                            f"pull {self.name}:{remote} failed: {self._sync_fail(sock, length)}"
                        )
                    else:
                        raise TransportError(f"pull {self.name}:{remote}: unexpected sync reply {ident!r}")
            sock.sendall(_SYNC.pack(b"QUIT", 0))
            os.replace(tmp, local)
        except (OSError, EOFError) as e:
            raise self._io_error(f"pull {self.name}:{remote}", e) from None
        finally:
            sock.close()
            tmp.unlink(missing_ok=True)
        return h.hexdigest()

    def interactive(self, *, term: str, columns: int, lines: int) -> Interactive:
        """The ``shell:`` service (adbd picks the pty; the size follows the device's own)."""
        return _ShellSession(self._open("shell:", None))

    # -- port forwarding -------------------------------------------------------
    def forward(self, remote_port: int) -> Forward:
        """``adb forward tcp:0 tcp:PORT`` through the device's adb server; closing removes the rule.

        A server on another lab host would bind that port over there, so for one the port is a
        listener here whose every connection is the device's ``tcp:PORT`` service opened through
        the server (what the server does per forwarded connection)."""
        serial, server = self.serial, self.server
        if is_remote(server):
            from edgelab.transport.forward import ListenerForward

            port = int(remote_port)

            def open_remote(_peer: tuple[str, int]) -> socket.socket:
                sock = open_transport(server, serial, f"tcp:{port}", self.timeout)
                sock.settimeout(None)  # a forwarded connection may idle as long as its client likes
                return sock

            return ListenerForward(port, open_remote, name=f"adb-forward-{self.name}")
        sock = open_server(server, self.timeout)
        try:
            send_request(sock, f"host-serial:{serial}:forward:tcp:0;tcp:{int(remote_port)}")
            status = recv_exact(sock, 4)  # the forward itself: OKAY + the port it bound
            if status == b"FAIL":
                raise TransportError(
                    f"adb forward to {self.name} port {remote_port}: {read_block(sock)}",
                    remedy="check the device with `edgelab device check`",
                )
            if status != b"OKAY":
                raise TransportError(f"adb server answered {status!r} to forward")
            local = int(read_block(sock).strip())
        except (OSError, EOFError, ValueError) as e:
            raise TransportError(f"adb forward to {self.name} port {remote_port} failed: {e}") from e
        finally:
            sock.close()

        def remove() -> None:
            try:
                with open_server(server, self.timeout) as s:
                    send_request(s, f"host-serial:{serial}:killforward:tcp:{local}")
                    recv_exact(s, 4)
            except (TransportError, OSError, EOFError):
                pass  # the server (or device) went away: so did the rule

        return Forward(local, int(remote_port), remove)
