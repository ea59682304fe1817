"""Resumable uploads of one local file into a device's ``<sha>.part``, from a byte offset.

SSH: SFTP with pipelined writes at explicit offsets, so a cut upload continues in place. Each
WRITE request is sized to fit one SSH channel packet (paramiko's default 32 KiB request needs two
against OpenSSH's 32 KiB max packet, doubling the per-packet Python cost) and goes out unbuffered,
up to ``SFTP_IN_FLIGHT`` unanswered (``_pipelined_writes``).
ADB: the sync protocol cannot append, and adbd deletes a file whose SEND was cut; so bytes go in
segments: the first straight into ``.part``, each later one into ``.seg`` and appended on the
device (``cat >>``). A cut loses at most the segment in flight.

The device hashes ``.part`` while it grows (``DeviceStore.follow``), so the transfer and the hash
overlap, and the file under its final name is still only ever one whose WHOLE SHA-256 was checked:
the follower reads ``.part`` itself (not the segments, not the stream we sent) in order, each range
``[off, off + step)`` once the file holds it, all ranges into ONE SHA-256 covering ``[0, size)``, and
renames ``.part`` into place only when that digest is the blob's name. Appends only ever add bytes
after the ones already hashed, so the bytes hashed are the bytes renamed. Anything else (a mismatch,
a stall, a cut) leaves ``.part`` for ``finalize``, which hashes the whole file again before a rename.
What cannot overlap is the tail: the last segment's append and hash start only after its last byte
arrived. So the last segment is small (``segment_end``): the work left after the transfer is a quarter
of a segment, not a whole one.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from edgelab.artifacts.devstore import DeviceStore, WindowsStore
from edgelab.errors import TransportError
from edgelab.transport.base import Transport

Sent = Callable[[int], None]
"""Called with the number of bytes just sent."""

SFTP_CHUNK = 1 << 20
SFTP_IN_FLIGHT = 128  # unanswered WRITEs (x ~32 KiB: beyond OpenSSH's 2 MiB channel window)
SFTP_WRITE_HEADER = 4 + 1 + 4 + 4 + 8 + 4  # length, type, request id, handle length, offset, data length
SYNC_DATA_MAX = 64 * 1024
SENT_REPORT = 1 << 20  # progress is reported per MiB, not per 64 KiB packet
ADB_SEGMENT = 64 << 20
ADB_TAIL_DIVISOR = 4  # the last segment is at most segment / 4: less device work after the last byte
_SYNC = struct.Struct("<4sI")


def upload(
    store: DeviceStore,
    local: Path,
    sha: str,
    offset: int,
    total: int,
    sent: Sent,
    *,
    segment: int = ADB_SEGMENT,
) -> None:
    """Send bytes ``[offset, total)`` of ``local`` onto the end of ``store.part(sha)`` (size ``offset``)."""
    t = store.t
    if t.kind == "ssh":
        _sftp_upload(store, local, sha, offset, total, sent)
    elif t.kind == "adb":
        _adb_upload(store, local, sha, offset, total, sent, segment)
    elif t.kind == "local":
        _local_upload(store, local, sha, offset, total, sent)
    else:  # pragma: no cover
        raise TransportError(f"no upload path for transport {t.kind}")


# -- SSH ----------------------------------------------------------------------------------------


def _sftp_upload(store: DeviceStore, local: Path, sha: str, offset: int, total: int, sent: Sent) -> None:
    import paramiko

    t = store.t
    part = store.part(sha)
    if isinstance(store, WindowsStore):
        part = store.sftp_path(part)
    try:
        sftp = t.sftp()  # type: ignore[attr-defined]
        with open(local, "rb") as fin:
            fout = sftp.open(part, "r+b" if offset else "wb", bufsize=0)
            try:
                fin.seek(offset)
                _pipelined_writes(sftp, fout.handle, fin, offset, total, _write_request_size(sftp, fout),
                                  local, sent)
            finally:
                try:
                    fout.close()  # waits for every pipelined write's status
                except (OSError, EOFError, paramiko.SSHException):
                    fout._closed = True  # connection gone: nothing left to close, not even in __del__
                    raise
    except (OSError, EOFError, paramiko.SSHException) as e:
        if isinstance(e, TransportError):
            raise
        raise TransportError(f"{getattr(t, 'name', 'device')}: upload to {part} cut: {e}") from e


def _pipelined_writes(sftp, handle: bytes, fin, pos: int, total: int, request: int, local: Path,
                      sent: Sent) -> None:
    """WRITE requests for bytes ``[pos, total)`` at their offsets, up to ``SFTP_IN_FLIGHT`` unanswered.

    paramiko's own pipelined ``SFTPFile.write`` waits, once 100 requests are out and one answer
    is in, for the answers to ALL of them: the pipe runs dry every ~3 MiB and the link idles a
    round trip. Here each answer is collected as it arrives (in order: sftp-server answers in
    order) and the pipe stays full; a failed WRITE raises from ``_read_response`` (its status).
    """
    from paramiko.sftp import CMD_STATUS, CMD_WRITE, int64

    out: deque[int] = deque()
    ready = sftp.sock.recv_ready

    def collect() -> None:
        t, _ = sftp._read_response(out.popleft())
        if t != CMD_STATUS:
            raise TransportError(f"sftp-server answered a WRITE with message type {t}")

    while pos < total:
        block = fin.read(min(SFTP_CHUNK, total - pos))
        if not block:
            raise TransportError(f"{local} shrank while it was being pushed", remedy="push again")
        for i in range(0, len(block), request):
            piece = block[i : i + request]
            out.append(sftp._async_request(type(None), CMD_WRITE, handle, int64(pos + i), piece))
            while out and (len(out) >= SFTP_IN_FLIGHT or ready()):
                collect()
        pos += len(block)
        sent(len(block))
    while out:
        collect()


def _write_request_size(sftp, fout) -> int:
    """Largest WRITE payload whose SFTP message fits one channel packet (paramiko sends at most
    the peer's max packet minus 64 bytes per packet)."""
    per_packet = sftp.get_channel().out_max_packet_size - 64
    fits = per_packet - SFTP_WRITE_HEADER - len(fout.handle)
    return max(4096, min(fits, fout.MAX_REQUEST_SIZE))


# -- ADB ----------------------------------------------------------------------------------------


def _sync_send(t: Transport, local: Path, start: int, end: int, remote: str, sent: Sent) -> None:
    """One sync SEND of bytes [start, end) of ``local`` as ``remote`` (64 KiB DATA packets)."""
    from edgelab.transport.adb_server import open_transport, recv_exact

    name = getattr(t, "name", "device")
    try:
        sock = open_transport(t.server, t.serial, "sync:", timeout=t.timeout)  # type: ignore[attr-defined]
    except TransportError:
        raise
    try:
        sock.settimeout(60.0)
        target = f"{remote},{0o100644}".encode()
        sock.sendall(_SYNC.pack(b"SEND", len(target)) + target)
        # one buffer holds each DATA packet, header and payload, filled in place: no copies per packet
        buf = bytearray(_SYNC.size + SYNC_DATA_MAX)
        view = memoryview(buf)
        unreported = 0
        with open(local, "rb", buffering=0) as f:
            f.seek(start)
            left = end - start
            while left > 0:
                want = min(SYNC_DATA_MAX, left)
                got = f.readinto(view[_SYNC.size : _SYNC.size + want])
                if not got:
                    raise TransportError(f"{local} shrank while it was being pushed", remedy="push again")
                _SYNC.pack_into(buf, 0, b"DATA", got)
                sock.sendall(view[: _SYNC.size + got])
                left -= got
                unreported += got
                if unreported >= SENT_REPORT or left == 0:  # a progress bar needs no 64 KiB steps
                    sent(unreported)
                    unreported = 0
        sock.sendall(_SYNC.pack(b"DONE", int(os.stat(local).st_mtime)))
        ident, length = _SYNC.unpack(recv_exact(sock, _SYNC.size))
        if ident == b"FAIL":
            raise TransportError(
                f"{name}: push to {remote} failed: {recv_exact(sock, length).decode('utf-8', 'replace')}"
            )
        if ident != b"OKAY":
            raise TransportError(f"{name}: push to {remote}: unexpected sync reply {ident!r}")
        sock.sendall(_SYNC.pack(b"QUIT", 0))
    except (OSError, EOFError) as e:
        raise TransportError(f"{name}: push to {remote} cut: {e}") from None
    finally:
        sock.close()


def _adb_upload(
    store: DeviceStore, local: Path, sha: str, offset: int, total: int, sent: Sent, segment: int
) -> None:
    """First segment straight into ``.part``; later ones into two alternating ``.seg`` files, each
    appended on the device by a second connection while the next one is sent (in order)."""
    part = store.part(sha)
    pos = offset
    if pos == 0:
        end = segment_end(0, total, segment)
        _sync_send(store.t, local, 0, end, part, sent)
        pos = end
    pending: dict[int, Future] = {}
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="edgelab-append") as appender:
        try:
            i = 0
            while pos < total:
                slot = i % 2
                if slot in pending:
                    _settle(pending.pop(slot))  # that .seg has been appended: reuse its name
                end = segment_end(pos, total, segment)
                _sync_send(store.t, local, pos, end, store.seg(sha, slot), sent)
                pending[slot] = appender.submit(store.append, store.seg(sha, slot), part, end - pos)
                pos, i = end, i + 1
        finally:
            for fut in pending.values():
                _settle(fut)  # a cut append leaves .part at some size; the retry resumes from there


def segment_end(pos: int, total: int, segment: int) -> int:
    """Where the segment starting at ``pos`` ends: ``segment`` bytes on, except that the last
    ``segment`` bytes or so are split so that the final segment is at most ``segment / 4``
    (e.g. 256 MiB in 64 MiB segments: 64, 64, 64, 48, 16)."""
    left = total - pos
    tail = max(1, segment // ADB_TAIL_DIVISOR)
    if left <= tail:
        return total
    if left <= segment + tail:  # this segment and a small last one cover the rest
        return pos + min(segment, left - tail)
    return pos + segment


def _settle(fut: Future) -> None:
    try:
        fut.result()
    except (OSError, EOFError) as e:  # a shell connection torn down under the append
        raise TransportError(f"append on the device cut: {e}") from e


# -- local (the lab host itself) ----------------------------------------------------------------


def _local_upload(store: DeviceStore, local: Path, sha: str, offset: int, total: int, sent: Sent) -> None:
    with open(local, "rb") as fin, open(store.part(sha), "r+b" if offset else "wb") as fout:
        fin.seek(offset)
        fout.seek(offset)
        while block := fin.read(SFTP_CHUNK):
            fout.write(block)
            sent(len(block))
