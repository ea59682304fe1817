"""File transfer over an SFTP session: atomic upload (``.edgelab-part`` then rename) and download.

Both hash what they move (SHA-256), so the caller can verify a push without reading the file
back. The session itself belongs to an ``SSHTransport`` (opened once, reopened after a reconnect).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
from pathlib import Path

import paramiko

from edgelab.errors import TransportError
from edgelab.transport.base import Progress
from edgelab.transport.ssh.connect import MAX_PACKET, WINDOW_SIZE

COPY_CHUNK = 1 << 20
SFTP_READ = paramiko.SFTPFile.MAX_REQUEST_SIZE  # what one prefetched SFTP read request returns


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
