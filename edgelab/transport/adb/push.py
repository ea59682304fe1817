"""Bytes onto an Android device through the adb server, whole or resumable.

Two services carry them:

* ``sync:`` SEND, ``adb push``'s own protocol: the whole file in 64 KiB DATA packets, answered once
  at DONE. adbd makes the file visible only at DONE and deletes what a cut SEND left, so a SEND can
  neither append nor resume (``sync_send``).
* shell v2 stdin into ``cat >> FILE`` (``append``): the bytes land after those already in the file,
  in order, as they arrive. A cut keeps every byte that reached the file, so the next put resumes
  from there; and the file grows while it is written, so the device can hash it meanwhile
  (``DeviceStore.follow``) instead of after the last byte. Before ``cat`` starts, the command makes
  the file hold exactly ``offset`` bytes (created at 0, cut back beyond the resume point, as
  ``Transport.put`` says); one holding fewer fails the put instead of being appended to.

``feed`` is the second one's general form: any shell command with a file's bytes on its stdin,
streamed, answering its exit code and output. The device store runs its whole receive through it
(append, hash while the file grows, check, rename: ``DeviceStore.receive``), one service open.
"""

from __future__ import annotations

import os
import select
import socket
import stat
import struct
from collections.abc import Callable
from pathlib import Path

from edgelab.errors import TransportError
from edgelab.transport.adb.server import recv_exact
from edgelab.transport.base import Progress
from edgelab.transport.quoting import Shell, join

SYNC_DATA_MAX = 64 * 1024  # the sync protocol's largest DATA packet
STDIN_CHUNK = 1024 * 1024  # payload of one shell v2 stdin packet
REPORT_EVERY = 1 << 20  # progress per MiB, not per packet
_SYNC = struct.Struct("<4sI")
_V2 = struct.Struct("<BI")
ID_STDIN, ID_STDOUT, ID_STDERR, ID_EXIT, ID_CLOSE_STDIN = range(5)
WRONG_SIZE_EXIT = 7
KEEP_OUTPUT = 64 * 1024  # of a fed command's stdout and of its stderr

# $1 file, $2 the bytes it must hold already (beyond them it is cut back); then stdin is appended
_APPEND_SCRIPT = (
    'if [ "$2" = 0 ]; then mkdir -p "${1%/*}" && : > "$1" || exit 1; fi; '
    'have=$(stat -c %s "$1" 2>/dev/null) || have=0; '
    'if [ "$have" -gt "$2" ]; then truncate -s "$2" "$1" || exit 1; have=$2; fi; '
    f'[ "$have" = "$2" ] || {{ echo "$1 holds $have bytes, not $2" >&2; exit {WRONG_SIZE_EXIT}; }}; '
    'exec cat >> "$1"'
)

Open = Callable[[str, float | None], socket.socket]
"""Opens one adb service on the device: (service, socket timeout) -> a connected socket."""


def _check_size(local: Path, remote: str, offset: int, name: str) -> int:
    try:
        total = os.stat(local).st_size
    except OSError as e:
        raise TransportError(f"cannot read {local}: {e.strerror}") from e
    if not 0 <= offset <= total:
        raise TransportError(f"{name}: cannot resume {remote} at {offset}: {local} has only {total} bytes")
    return total


def sync_send(
    open_service: Open,
    local: Path,
    remote: str,
    *,
    progress: Progress | None = None,
    digest=None,
    name: str = "device",
    idle_s: float = 60.0,
) -> None:
    """The whole of ``local`` as ``remote`` in one sync SEND, with the file's mode bits.

    ``digest``: a hashlib object fed every byte sent (the caller's record of what went out).
    """
    st = os.stat(local)
    total = st.st_size
    mode = stat.S_IFREG | (st.st_mode & 0o777 or 0o644)
    target = f"{remote},{mode}".encode()
    if len(target) > 1024:
        raise TransportError(f"remote path too long for adb: {remote[:80]}...")
    sock = open_service("sync:", idle_s)
    try:
        sock.sendall(_SYNC.pack(b"SEND", len(target)) + target)
        buf = bytearray(_SYNC.size + SYNC_DATA_MAX)  # header and payload filled in place: no copies
        view = memoryview(buf)
        done = reported = 0
        with open(local, "rb", buffering=0) as f:
            while done < total:
                got = f.readinto(view[_SYNC.size : _SYNC.size + min(SYNC_DATA_MAX, total - done)])
                if not got:
                    raise TransportError(f"{local} shrank while it was being pushed", remedy="push again")
                _SYNC.pack_into(buf, 0, b"DATA", got)
                sock.sendall(view[: _SYNC.size + got])
                if digest is not None:
                    digest.update(view[_SYNC.size : _SYNC.size + got])
                done += got
                if progress and (done - reported >= REPORT_EVERY or done == total):
                    progress(done, total)
                    reported = done
        sock.sendall(_SYNC.pack(b"DONE", int(st.st_mtime)))
        ident, length = _SYNC.unpack(recv_exact(sock, _SYNC.size))
        if ident == b"FAIL":
            why = recv_exact(sock, length).decode("utf-8", "replace")
            raise TransportError(f"{name}: push to {remote} failed: {why}")
        if ident != b"OKAY":
            raise TransportError(f"{name}: push to {remote}: unexpected sync reply {ident!r}")
        sock.sendall(_SYNC.pack(b"QUIT", 0))
        if progress and total == 0:
            progress(0, 0)
    finally:
        sock.close()


def feed(
    open_service: Open,
    local: Path,
    line: str,
    offset: int = 0,
    *,
    progress: Progress | None = None,
    name: str = "device",
    idle_s: float = 60.0,
    answer_s: float | None = None,
) -> tuple[int | None, str, str]:
    """Run the shell command ``line`` (shell v2) with bytes ``[offset, size)`` of ``local`` on its
    stdin, in 1 MiB packets as fast as the device takes them; (exit code or None, stdout, stderr).

    The answer is read while the bytes go out: output the command prints meanwhile is kept, and
    a command that ends before its stdin does (it refused: a wrong resume point) stops the sending
    at once, its exit status kept, never lost to a send into a stream the device already closed.
    ``progress`` gets (position in ``local``, size). ``answer_s``: how long the command may take
    after its last input byte (it may still be working on them: hashing).
    """
    total = _check_size(local, "the device", offset, name)
    sock = open_service("shell,v2,raw:" + line, idle_s)
    answer = _Answer(sock)
    try:
        buf = bytearray(_V2.size + STDIN_CHUNK)
        view = memoryview(buf)
        done = reported = offset
        with open(local, "rb", buffering=0) as f:
            f.seek(offset)
            while done < total and answer.code is None:
                got = f.readinto(view[_V2.size : _V2.size + min(STDIN_CHUNK, total - done)])
                if not got:
                    raise TransportError(f"{local} shrank while it was being pushed", remedy="push again")
                _V2.pack_into(buf, 0, ID_STDIN, got)
                if not answer.send_while_reading(view[: _V2.size + got], idle_s):
                    break
                done += got
                if progress and (done - reported >= REPORT_EVERY or done == total):
                    progress(done, total)
                    reported = done
        if answer.code is None and not answer.ended:
            sock.sendall(_V2.pack(ID_CLOSE_STDIN, 0))
            if progress and total == offset:
                progress(total, total)
            if answer_s is not None:
                sock.settimeout(max(answer_s, idle_s))
            answer.read_to_exit()
        return answer.result()
    finally:
        sock.close()


class _Answer:
    """The shell v2 packets a fed command sends back: stdout and stderr (first 64 KiB of each)
    and its exit status, read as they come, also while its stdin is still being sent."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.out, self.err = bytearray(), bytearray()
        self.code: int | None = None
        self.ended = False  # the stream closed (with or without an exit status)

    def _packet(self) -> None:
        try:
            kind, length = _V2.unpack(recv_exact(self.sock, _V2.size))
            data = recv_exact(self.sock, length) if length else b""
        except EOFError:
            self.ended = True
            return
        if kind == ID_STDOUT:
            self.out += data[: KEEP_OUTPUT - len(self.out)]
        elif kind == ID_STDERR:
            self.err += data[: KEEP_OUTPUT - len(self.err)]
        elif kind == ID_EXIT:
            self.code = data[0] if data else 255
            self.ended = True

    def send_while_reading(self, data: memoryview, idle_s: float) -> bool:
        """Send ``data``, reading whatever the command answers meanwhile; False once it ended."""
        while data:
            readable, writable, _ = select.select([self.sock], [self.sock], [], idle_s)
            if not readable and not writable:
                raise TimeoutError(f"the device took no byte for {idle_s:g}s")
            if readable:
                self._packet()
                if self.ended:
                    return False
                continue
            try:
                data = data[self.sock.send(data) :]  # what fits now: never blocked behind an answer
            except (BrokenPipeError, ConnectionResetError):
                self.read_to_exit(quiet=True)  # the command ended: its answer may be here already
                if self.ended:
                    return False
                raise
        return True

    def read_to_exit(self, *, quiet: bool = False) -> None:
        try:
            while not self.ended:
                self._packet()
        except OSError:
            if not quiet:
                raise
            self.ended = True

    def result(self) -> tuple[int | None, str, str]:
        err = self.err.decode("utf-8", "replace")
        if self.code is None:
            err = err or "the shell ended without an exit status"
        return self.code, self.out.decode("utf-8", "replace"), err


def append(
    open_service: Open,
    local: Path,
    remote: str,
    offset: int,
    *,
    progress: Progress | None = None,
    name: str = "device",
    idle_s: float = 60.0,
) -> None:
    """Bytes ``[offset, size)`` of ``local`` appended to ``remote``, which must hold ``offset`` bytes
    at least (``remote`` is created at 0 and cut back to ``offset`` beyond it).

    Needs shell_v2 (its stdin packets and the command's exit status). ``progress`` gets
    (bytes of the file on the device, file size).
    """
    line = join(["sh", "-c", _APPEND_SCRIPT, "edgelab-append", remote, str(offset)], Shell.TOYBOX)
    code, _out, err = feed(open_service, local, line, offset, progress=progress, name=name, idle_s=idle_s)
    if code == WRONG_SIZE_EXIT:
        raise TransportError(
            f"{name}: cannot resume: {err.strip()[:200]}",
            remedy="push again: the partial upload is checked and restarted",
        )
    if code != 0:
        raise TransportError(
            f"{name}: append to {remote} failed (exit {code}): {err.strip()[:200]}",
            remedy="check free space and permissions on the device",
        )
