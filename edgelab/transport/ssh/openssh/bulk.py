"""Bulk uploads through the system OpenSSH client, held to edgelab's own host-key trust.

Why: paramiko encrypts and frames every SSH packet in Python, so 256 MiB over SFTP costs about
1.3 s of client CPU on the lab host, more than ``rsync -e ssh`` takes for the whole job. The
``ssh`` binary does the same work in C with AES-NI, so a resumable put (``Transport.put`` with an
offset) sends its bytes through ``ssh DEVICE 'cat >> PART'``: the kernel copies the file into the
client's stdin (``sendfile``), no byte passes through Python. The client is started before the
caller knows the offset (``prepare``: its key exchange and login overlap the store's round trips),
so the first line it reads names the offset and the file.

Only when it is at least as safe as the paramiko connection it rides beside:

* the host key: the ONE key that ``hostkeys.verify`` accepted on this transport's (paramiko)
  connection is written to a private known_hosts, the only file ``ssh`` reads
  (``StrictHostKeyChecking yes``, ``GlobalKnownHostsFile /dev/null``, a fixed ``HostKeyAlias``,
  ``HostKeyAlgorithms`` of that key's type, no DNS, no key update); a server that shows any other
  key is refused with ``HostKeyError``, as on the paramiko path;
* the configuration is edgelab's: ``-F`` names a private config written here, so the user's
  ``~/.ssh/config`` cannot loosen it (no ProxyCommand, no ControlMaster, no forwarding);
* authentication by key or agent only, never a prompt (``BatchMode yes``); nothing secret on the
  command line or in a log (the argv holds file names and the quoted remote command);
* the remote command comes from ``quoting.join_posix``.

Jump hosts (ProxyJump) are blocks of the same private config, each with the one key verified for
it on the paramiko chain. Anything else falls back to SFTP (``BulkUnavailable``, with the reason
the push reports): no ``ssh`` binary, a Windows (PowerShell) endpoint, ``EDGELAB_SSH_BULK=off``, or an
``ssh`` that could not log in where paramiko could (a key file OpenSSH finds too open, an agent
or key it cannot reach, ...).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

import paramiko

from edgelab.errors import BulkUnavailable, HostKeyError, TransportError
from edgelab.transport.base import Progress
from edgelab.transport.quoting import join_posix
from edgelab.transport.ssh.config import Hop
from edgelab.transport.ssh.hostkeys import fingerprint
from edgelab.transport.ssh.openssh.pinned_client import (
    CIPHER_LINE,
    CIPHERS,
    HOSTKEY_REFUSED,
    ClientFiles,
    PinnedKey,
)
from edgelab.transport.ssh.openssh.session import PIPE_SIZE, end_process, send_file

log = logging.getLogger(__name__)

PENDING_S = 30.0  # a prepared client nobody used for this long is stopped
READY, DONE = "edgelab-bulk-ready", "edgelab-bulk-done"

# The first line of stdin is "OFFSET PATH" (the client starts before the caller knows either:
# ``prepare``); ``read`` takes a pipe byte by byte, so the file's bytes that follow stay for cat.
# At offset 0 the file is created (its directory too, as SFTP's put does); otherwise it must exist
# and is cut to the offset (dd with no input truncates at seek), so what an earlier cut left beyond
# the verified prefix is gone. Then every other byte of stdin is appended.
_RECEIVE = r"""
IFS=' ' read -r off p || exit 0
case $off in ''|*[!0-9]*) echo "bad header" >&2; exit 2;; esac
case $p in "~/"*) p=$HOME/${p#??};; esac
if [ "$off" -eq 0 ]; then
  d=${p%/*}; if [ "$d" != "$p" ] && [ -n "$d" ]; then mkdir -p "$d" || exit 1; fi
  : > "$p" || exit 1
else
  [ -f "$p" ] || { echo "$p is not on the device" >&2; exit 3; }
  dd if=/dev/null of="$p" bs=1 seek="$off" 2>/dev/null || exit 1
fi
echo edgelab-bulk-ready
cat >> "$p" || exit 1
echo edgelab-bulk-done
"""


class _Client:
    """One ``ssh`` process running the receive script, waiting for its header line on stdin."""

    def __init__(self, argv: list[str], err_path: Path):
        self.err_path = err_path
        with open(err_path, "wb") as err:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, start_new_session=True
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(self.proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        self.out = b""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        self.out = self.proc.stdout.read()

    def finish(self) -> tuple[int, str, str]:
        """(exit status, stdout, ssh's log) once the client ended."""
        with contextlib.suppress(OSError):
            if self.proc.stdin:
                self.proc.stdin.close()
        code = self.proc.wait()
        self._reader.join(5)
        log_text = self.err_path.read_text(encoding="utf-8", errors="replace")
        self.err_path.unlink(missing_ok=True)
        return code, self.out.decode("utf-8", "replace"), log_text

    def stop(self) -> None:
        """End the client (the device's ``cat`` sees the end of its input: what arrived stays)."""
        end_process(self.proc)
        with contextlib.suppress(OSError):
            if self.proc.stdin:
                self.proc.stdin.close()
        self._reader.join(5)
        self.err_path.unlink(missing_ok=True)


class OpenSSHBulk:
    """Uploads to one device through ``ssh``; made per transport, its private files removed on ``close``."""

    def __init__(
        self,
        hop: Hop,
        host_key: paramiko.PKey,
        *,
        name: str,
        timeout: float,
        binary: str,
        jumps: Sequence[tuple[Hop, paramiko.PKey]] = (),
    ):
        """``jumps``: the hosts on the way (outermost first), each with the key verified for it."""
        self.hop, self.name, self.binary = hop, name, binary
        self.host_key = host_key
        chain = [(h, [PinnedKey(k.get_name(), k.get_base64())]) for h, k in [*jumps, (hop, host_key)]]
        self.files = ClientFiles(chain, timeout=timeout, binary=binary)
        self.dir, self.config = self.files.dir, self.files.config
        self.cipher: str | None = None  # negotiated, once a transfer ran
        self._pending: _Client | None = None  # started by prepare, used by the next send
        self._lock = threading.Lock()
        self._expiry: threading.Timer | None = None
        self._count = 0
        self.running: subprocess.Popen | None = None  # the client while it sends (tests cut it)

    def describe(self) -> str:
        return f"openssh ({self.cipher or CIPHERS[0] + ' offered first'})"

    def argv(self) -> list[str]:
        return self.files.argv(join_posix(["sh", "-c", _RECEIVE, "edgelab-receive"]))

    def _start(self) -> _Client:
        self._count += 1
        try:
            return _Client(self.argv(), self.dir / f"ssh-{self._count}.log")
        except OSError as e:
            raise BulkUnavailable(f"cannot run {self.binary}: {e.strerror}") from e

    def prepare(self) -> None:
        """Start the next upload's client now: its connection (key exchange, login, the device's
        shell) then overlaps whatever the caller does before ``send``. Unused for ``PENDING_S``, it
        is stopped (the device's script sees no header and exits untouched)."""
        with self._lock:
            if self._pending is not None and self._pending.proc.poll() is None:
                return
            self._pending = self._start()
            if self._expiry is not None:
                self._expiry.cancel()
            self._expiry = threading.Timer(PENDING_S, self._drop_pending)
            self._expiry.daemon = True
            self._expiry.start()

    def _take_pending(self) -> _Client | None:
        with self._lock:
            client, self._pending = self._pending, None
            if self._expiry is not None:
                self._expiry.cancel()
                self._expiry = None
        return client

    def _drop_pending(self) -> None:
        client = self._take_pending()
        if client is not None:
            client.stop()

    def send(self, local: Path, remote: str, offset: int, progress: Progress | None = None) -> str:
        """Bytes ``[offset, size)`` of ``local`` appended to ``remote`` cut to ``offset`` (created at 0),
        as ``Transport.put`` with an offset promises; returns how they travelled (``describe``).

        Raises BulkUnavailable when ``ssh`` never got to run the command (the caller falls back),
        HostKeyError when it met another host key, TransportError when the transfer was cut.
        """
        try:
            total = local.stat().st_size
        except OSError as e:
            raise TransportError(f"cannot read {local}: {e.strerror}") from e
        if offset > total:
            raise TransportError(
                f"{self.name}: cannot resume {remote} at {offset}: {local} has only {total} bytes"
            )
        if remote != remote.strip() or any(c in remote for c in "\n\r\0"):
            raise BulkUnavailable(f"{remote!r} cannot travel in the receive header")
        pending = self._take_pending()
        if pending is not None:
            try:
                return self._send_with(pending, local, remote, offset, total, progress)
            except BulkUnavailable as e:  # it may have died waiting (a restarted sshd): once more
                log.info("%s: the prepared OpenSSH client failed (%s); starting another", self.name, e)
        return self._send_with(self._start(), local, remote, offset, total, progress)

    def _send_with(
        self, client: _Client, local: Path, remote: str, offset: int, total: int, progress: Progress | None
    ) -> str:
        self.running = client.proc
        try:
            pos = self._feed(client, local, remote, offset, total, progress)
            code, out, log_text = client.finish()
        except BaseException:
            client.stop()
            raise
        finally:
            self.running = None
        if m := CIPHER_LINE.search(log_text):
            self.cipher = m.group(1)
        said = [ln for ln in log_text.splitlines() if ln.strip() and not ln.startswith("debug")]
        detail = "; ".join(said)[-300:] or f"exit status {code}"
        if READY not in out:
            if any(s in log_text.lower() for s in HOSTKEY_REFUSED):
                raise HostKeyError(
                    f"{self.name}: the OpenSSH client was shown a host key other than the trusted "
                    f"{fingerprint(self.host_key)} ({detail})",
                    remedy=f"someone may be intercepting the connection; check the device, then "
                    f"`edgelab device trust {self.name} --replace` if it was reinstalled",
                )
            if code == 3:
                raise TransportError(
                    f"{self.name}: cannot resume {remote}: it is not on the device",
                    remedy="upload from offset 0",
                )
            raise BulkUnavailable(f"ssh could not run the upload ({detail})")
        if code != 0 or DONE not in out or pos != total:
            raise TransportError(f"{self.name}: upload of {local} to {remote} cut near {pos}: {detail}")
        if progress:
            progress(total, total)
        return self.describe()

    def _feed(
        self, client: _Client, local: Path, remote: str, offset: int, total: int, progress: Progress | None
    ) -> int:
        """The header, then the file's bytes from ``offset`` into the client's stdin (``sendfile``:
        the kernel copies them, Python only counts); the position reached (short when ssh quit)."""
        stdin = client.proc.stdin
        assert stdin is not None
        try:
            stdin.write(f"{offset} {remote}\n".encode())
            stdin.flush()
        except (BrokenPipeError, ConnectionResetError):
            return offset  # ssh quit: finish() says why
        pos = send_file(stdin.fileno(), local, offset, total, progress)  # a Ctrl-C stops the client
        if pos == total:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                stdin.close()
        return pos

    def close(self) -> None:
        self._drop_pending()
        self.files.close()


_REGISTRY: dict[tuple, OpenSSHBulk] = {}
_REGISTRY_LOCK = threading.Lock()


def bulk_for(
    hop: Hop,
    host_key: paramiko.PKey,
    *,
    name: str,
    timeout: float,
    binary: str,
    jumps: Sequence[tuple[Hop, paramiko.PKey]] = (),
) -> OpenSSHBulk:
    """The uploader of this hop chain and its host keys in this process: one per connection, like
    the pool's, so a client ``prepare``d through one transport serves the next transport's put."""
    key = (
        hop.pool_key,
        hop.identity_files,
        hop.identities_only,
        binary,
        tuple(k.asbytes() for _h, k in [*jumps, (hop, host_key)]),
    )
    with _REGISTRY_LOCK:
        bulk = _REGISTRY.get(key)
        if bulk is None:
            bulk = _REGISTRY[key] = OpenSSHBulk(
                hop, host_key, name=name, timeout=timeout, binary=binary, jumps=jumps
            )
        return bulk


def forget(bulk: OpenSSHBulk) -> None:
    """Drop (and close) an uploader that turned out unusable."""
    with _REGISTRY_LOCK:
        for k, v in list(_REGISTRY.items()):
            if v is bulk:
                del _REGISTRY[k]
    bulk.close()


def close_all() -> None:
    """Close every uploader of this process (their waiting clients stopped, private files removed)."""
    with _REGISTRY_LOCK:
        all_ = list(_REGISTRY.values())
        _REGISTRY.clear()
    for bulk in all_:
        bulk.close()
