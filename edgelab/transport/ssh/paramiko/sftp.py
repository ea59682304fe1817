"""File transfer over an SFTP session: atomic upload (``.edgelab-part`` then rename) and download.

Both hash what they move (SHA-256), so the caller can verify a push without reading the file
back. The session itself belongs to an ``SSHTransport`` (opened once, reopened after a reconnect).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
from collections import deque
from pathlib import Path
from typing import cast

import paramiko

from edgelab.errors import DeviceNotAnswering, TransportError
from edgelab.transport.base import Progress
from edgelab.transport.ssh.paramiko.connect import MAX_PACKET, WINDOW_SIZE

COPY_CHUNK = 1 << 20
IO_IDLE_S = 60.0  # an upload that sees no answer for this long has stalled (as adb's _IO_IDLE_S)
SFTP_READ = paramiko.SFTPFile.MAX_REQUEST_SIZE  # what one prefetched SFTP read request returns
IN_FLIGHT = 128  # unanswered WRITEs (x ~32 KiB: beyond OpenSSH's 2 MiB channel window)
WRITE_HEADER = 4 + 1 + 4 + 4 + 8 + 4  # length, type, request id, handle length, offset, data length


def open_client(client: paramiko.Transport) -> paramiko.SFTPClient | None:
    """A new SFTP session on ``client`` with edgelab's window and packet sizes."""
    return paramiko.SFTPClient.from_transport(client, window_size=WINDOW_SIZE, max_packet_size=MAX_PACKET)


def remote_path(sftp: paramiko.SFTPClient, remote: str) -> str:
    """``remote`` with a leading ``~`` made absolute (SFTP paths are relative to the login dir)."""
    if remote == "~" or remote.startswith("~/"):
        home = sftp.normalize(".")
        return posixpath.join(home, remote[2:]) if remote != "~" else home
    return remote


def makedirs(sftp: paramiko.SFTPClient, path: str, *, name: str) -> None:
    """``mkdir -p`` over SFTP; a non-directory in the way is an error naming device ``name``."""
    if not path or path in ("/", "."):
        return
    try:
        st = sftp.stat(path)
        if not stat.S_ISDIR(st.st_mode or 0):
            raise TransportError(f"{name}: {path} exists and is not a directory")
        return
    except FileNotFoundError:
        pass
    makedirs(sftp, posixpath.dirname(path.rstrip("/")), name=name)
    try:
        sftp.mkdir(path)
    except OSError:
        if not stat.S_ISDIR(sftp.stat(path).st_mode or 0):  # created meanwhile by someone else is fine
            raise


def put_file(
    sftp: paramiko.SFTPClient, local: Path, remote: str, *, name: str, progress: Progress | None = None
) -> str:
    """Upload ``local`` to ``remote`` atomically (mode kept); the SHA-256 of what was sent."""
    local = Path(local)
    try:
        total = local.stat().st_size
        mode = local.stat().st_mode & 0o7777
    except OSError as e:
        raise TransportError(f"cannot read {local}: {e.strerror}") from e
    target = remote_path(sftp, remote)
    part = target + ".edgelab-part"
    h = hashlib.sha256()
    done = 0
    try:
        makedirs(sftp, posixpath.dirname(target), name=name)
        with open(local, "rb") as fin, sftp.open(part, "wb", bufsize=COPY_CHUNK) as fout:
            fout.set_pipelined(True)
            while block := fin.read(COPY_CHUNK):
                fout.write(block)
                h.update(block)
                done += len(block)
                if progress:
                    progress(done, total)
        sftp.chmod(part, mode)
        try:
            sftp.posix_rename(part, target)
        except OSError:  # server without posix-rename@openssh.com
            try:
                sftp.remove(target)
            except OSError:
                pass
            sftp.rename(part, target)
    except (OSError, EOFError, paramiko.SSHException) as e:
        try:
            sftp.remove(part)
        except (OSError, EOFError, paramiko.SSHException):
            pass
        if isinstance(e, TransportError):
            raise
        raise TransportError(f"{name}: upload of {local} to {remote} failed: {e}") from e
    if progress and total == 0:
        progress(0, 0)
    return h.hexdigest()


def put_from(
    sftp: paramiko.SFTPClient,
    local: Path,
    remote: str,
    offset: int,
    *,
    name: str,
    progress: Progress | None = None,
) -> None:
    """Bytes ``[offset, size)`` of ``local`` into ``remote`` in place (``Transport.put`` with an offset).

    ``remote`` is created at offset 0 and truncated to ``offset`` otherwise, so whatever an earlier
    cut left beyond the resume point is gone; writes are pipelined, and closing the file waits for
    every write's status, so a return means the server acknowledged all of them. Each WRITE request
    fits one SSH channel packet and goes out unbuffered, up to ``IN_FLIGHT`` unanswered
    (``_pipelined_writes``): paramiko's default 32 KiB request needs two packets against OpenSSH's
    32 KiB max packet, doubling the per-packet Python cost."""
    local = Path(local)
    try:
        total = local.stat().st_size
    except OSError as e:
        raise TransportError(f"cannot read {local}: {e.strerror}") from e
    if offset > total:
        raise TransportError(f"{name}: cannot resume {remote} at {offset}: {local} has only {total} bytes")
    target = remote_path(sftp, remote)
    done = offset
    chan = sftp.get_channel()
    idle = chan.gettimeout() if chan is not None else None
    if chan is not None:
        chan.settimeout(IO_IDLE_S)  # a frozen device: a stalled upload, not one that waits forever
    try:
        if offset == 0:
            makedirs(sftp, posixpath.dirname(target), name=name)
        with open(local, "rb") as fin:
            fout = sftp.open(target, "r+b" if offset else "wb", bufsize=0)
            try:
                if offset:
                    fout.truncate(offset)
                    fin.seek(offset)

                def seen(pos: int, size: int) -> None:
                    nonlocal done
                    done = pos
                    if progress:
                        progress(pos, size)

                _pipelined_writes(
                    sftp, _raw_handle(fout), fin, offset, total, write_request_size(sftp, fout), local, seen
                )
            except TimeoutError:
                # the device stopped answering: no CLOSE that would wait as long again; the
                # session is given up (the transport opens a new one for the next try)
                fout._closed = True  # type: ignore[attr-defined]  # BufferedFile's flag, not in the stubs
                if chan is not None:
                    chan.close()
                raise
            finally:
                try:
                    if not fout._closed:  # type: ignore[attr-defined]
                        fout.close()  # waits for every pipelined write's status
                except (OSError, EOFError, paramiko.SSHException):
                    # connection gone: nothing left to close, not even in __del__
                    fout._closed = True  # type: ignore[attr-defined]  # BufferedFile's flag, not in the stubs
                    raise
    except FileNotFoundError as e:
        raise TransportError(
            f"{name}: cannot resume {remote}: it is not on the device", remedy="upload from offset 0"
        ) from e
    except TimeoutError as e:
        raise DeviceNotAnswering(
            f"{name}: did not answer within {IO_IDLE_S:g}s during the upload of {local} (cut at {done}): "
            "frozen or hung",
            remedy="check the device; the next push resumes from what arrived",
        ) from e
    except (OSError, EOFError, paramiko.SSHException) as e:
        if isinstance(e, TransportError):
            raise
        raise TransportError(f"{name}: upload of {local} to {remote} cut at {done}: {e}") from e
    finally:
        if chan is not None:
            try:
                chan.settimeout(idle)
            except (OSError, EOFError):
                pass
    if progress and done == total == offset:
        progress(done, total)


def _pipelined_writes(
    sftp: paramiko.SFTPClient,
    handle: bytes,
    fin,
    pos: int,
    total: int,
    request: int,
    local: Path,
    progress: Progress | None,
) -> None:
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
        t, _ = sftp._read_response(out.popleft())  # type: ignore[attr-defined]  # no public API pipelines
        if t != CMD_STATUS:
            raise TransportError(f"sftp-server answered a WRITE with message type {t}")

    while pos < total:
        block = fin.read(min(COPY_CHUNK, total - pos))
        if not block:
            raise TransportError(f"{local} shrank while it was being pushed", remedy="push again")
        for i in range(0, len(block), request):
            piece = block[i : i + request]
            out.append(
                sftp._async_request(  # type: ignore[attr-defined]  # no public API pipelines
                    type(None), CMD_WRITE, handle, int64(pos + i), piece
                )
            )
            while out and (len(out) >= IN_FLIGHT or ready()):
                collect()
        pos += len(block)
        if progress:
            progress(pos, total)
    while out:
        collect()


def _raw_handle(fout: paramiko.SFTPFile) -> bytes:
    """The server's opaque file handle: bytes at run time (typeshed's stubs call it an SFTPHandle)."""
    return cast(bytes, fout.handle)


def write_request_size(sftp: paramiko.SFTPClient, fout: paramiko.SFTPFile) -> int:
    """Largest WRITE payload whose SFTP message fits one channel packet (paramiko sends at most
    the peer's max packet minus 64 bytes per packet)."""
    chan = sftp.get_channel()
    if chan is None:
        raise TransportError("the SFTP session has no channel", remedy="connect again")
    per_packet = chan.out_max_packet_size - 64
    fits = per_packet - WRITE_HEADER - len(_raw_handle(fout))
    return max(4096, min(fits, fout.MAX_REQUEST_SIZE))


def get_file(
    sftp: paramiko.SFTPClient, remote: str, local: Path, *, name: str, progress: Progress | None = None
) -> str:
    """Download ``remote`` to ``local`` atomically (mode kept); the SHA-256 of what arrived."""
    local = Path(local)
    source = remote_path(sftp, remote)
    h = hashlib.sha256()
    done = 0
    local.parent.mkdir(parents=True, exist_ok=True)
    part = local.with_name(local.name + ".edgelab-part")
    try:
        with sftp.open(source, "rb") as fin:
            st = fin.stat()
            total = st.st_size or 0
            if st.st_mode is not None and stat.S_ISDIR(st.st_mode):
                raise TransportError(f"{remote} is a directory on {name}")
            fin.prefetch(total)
            reported = 0
            with open(part, "wb") as fout:
                # Reads of one SFTP request each: paramiko joins larger reads from prefetched
                # pieces by repeated concatenation, which costs more than the transfer itself.
                while block := fin.read(SFTP_READ):
                    fout.write(block)
                    h.update(block)
                    done += len(block)
                    if progress and (done - reported >= COPY_CHUNK or done == total):
                        reported = done
                        progress(done, total)
        if st.st_mode is not None:
            os.chmod(part, st.st_mode & 0o777)
        os.replace(part, local)
    except FileNotFoundError as e:
        part.unlink(missing_ok=True)
        raise TransportError(f"{remote}: no such file on {name}") from e
    except (OSError, EOFError, paramiko.SSHException) as e:
        part.unlink(missing_ok=True)
        if isinstance(e, TransportError):
            raise
        raise TransportError(f"{name}: download of {remote} failed: {e}") from e
    if progress and done == 0:
        progress(0, 0)
    return h.hexdigest()
