"""Resumable SFTP upload (``SSHTransport.put`` with an offset): bytes ``[offset, size)`` of a local file written at their offsets.

A cut upload continues in place: the caller's file keeps what arrived, and the next put starts at
its size. Each WRITE request is sized to fit one SSH channel packet (paramiko's default 32 KiB
request needs two against OpenSSH's 32 KiB max packet, doubling the per-packet Python cost) and
goes out unbuffered, up to ``IN_FLIGHT`` unanswered (``_pipelined_writes``).
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

import paramiko

from edgelab.errors import TransportError
from edgelab.transport.base import Progress

READ_CHUNK = 1 << 20
IN_FLIGHT = 128  # unanswered WRITEs (x ~32 KiB: beyond OpenSSH's 2 MiB channel window)
WRITE_HEADER = 4 + 1 + 4 + 4 + 8 + 4  # length, type, request id, handle length, offset, data length


def put_from(sftp: paramiko.SFTPClient, local: Path, remote: str, offset: int, *,
             progress: Progress | None = None, name: str = "device") -> None:
    """Write bytes ``[offset, size)`` of ``local`` into ``remote`` at their offsets (created at 0).

    ``progress`` gets (bytes of the file on the device, file size) per MiB.
    """
    try:
        total = os.stat(local).st_size
    except OSError as e:
        raise TransportError(f"cannot read {local}: {e.strerror}") from e
    if not 0 <= offset <= total:
        raise TransportError(f"cannot resume {local} at byte {offset}: it has {total}")
    try:
        with open(local, "rb") as fin:
            fout = sftp.open(remote, "r+b" if offset else "wb", bufsize=0)
            try:
                fin.seek(offset)
                _pipelined_writes(sftp, fout.handle, fin, offset, total, write_request_size(sftp, fout),
                                  local, progress)
            finally:
                try:
                    fout.close()  # waits for every pipelined write's status
                except (OSError, EOFError, paramiko.SSHException):
                    fout._closed = True  # connection gone: nothing left to close, not even in __del__
                    raise
    except (OSError, EOFError, paramiko.SSHException) as e:
        if isinstance(e, TransportError):
            raise
        raise TransportError(f"{name}: upload to {remote} cut: {e}") from e
    if progress and total == offset:
        progress(total, total)


def _pipelined_writes(sftp: paramiko.SFTPClient, handle: bytes, fin, pos: int, total: int, request: int,
                      local: Path, progress: Progress | None) -> None:
    """WRITE requests for bytes ``[pos, total)`` at their offsets, up to ``IN_FLIGHT`` unanswered.

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
        block = fin.read(min(READ_CHUNK, total - pos))
        if not block:
            raise TransportError(f"{local} shrank while it was being pushed", remedy="push again")
        for i in range(0, len(block), request):
            piece = block[i : i + request]
            out.append(sftp._async_request(type(None), CMD_WRITE, handle, int64(pos + i), piece))
            while out and (len(out) >= IN_FLIGHT or ready()):
                collect()
        pos += len(block)
        if progress:
            progress(pos, total)
    while out:
        collect()


def write_request_size(sftp: paramiko.SFTPClient, fout: paramiko.SFTPFile) -> int:
    """Largest WRITE payload whose SFTP message fits one channel packet (paramiko sends at most
    the peer's max packet minus 64 bytes per packet)."""
    per_packet = sftp.get_channel().out_max_packet_size - 64
    fits = per_packet - WRITE_HEADER - len(fout.handle)
    return max(4096, min(fits, fout.MAX_REQUEST_SIZE))
