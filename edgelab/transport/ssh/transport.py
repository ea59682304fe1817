"""``SSHTransport``: the transport surface (run, stream, put, get, forward, close) over SSH.

Many instances share one pooled connection (``pool``); each command is a session channel
(``channel``), files go over SFTP (``sftp``). Windows hosts get the same surface through
PowerShell (``winscripts``), whatever DefaultShell their OpenSSH runs.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import paramiko

from edgelab.errors import HostKeyError, RemoteTimeout, SSHAuthError, TransportError
from edgelab.transport import winps, winscripts
from edgelab.transport.base import (
    Capability,
    Deadline,
    Endpoint,
    Progress,
    RemoteProcess,
    RunResult,
    Transport,
    TransportOptions,
    posix_kill_argv,
    posix_stream_argv,
)
from edgelab.transport.forward import Forward
from edgelab.transport.quoting import Shell, encode_powershell, join_posix
from edgelab.transport.ssh.config import Hop
from edgelab.transport.ssh.openssh.bulk import BulkUnavailable, OpenSSHBulk, bulk_for, forget
from edgelab.transport.ssh.openssh.pinned_client import ssh_binary, switched_off
from edgelab.transport.ssh.paramiko.channel import (
    KILL_GRACE_S,
    Pump,
    SSHInteractive,
    SSHProcess,
    exit_code,
    feed,
)
from edgelab.transport.ssh.paramiko.connect import MAX_PACKET, WINDOW_SIZE, resolve_endpoint
from edgelab.transport.ssh.paramiko.pool import POOL, PoolKey
from edgelab.transport.ssh.paramiko.sftp import get_file, open_client, put_file, put_from

log = logging.getLogger(__name__)

_LOGIN_SHELLS: dict[
    PoolKey, str
] = {}  # pool key -> the default shell a Windows host's sshd runs (cmd | powershell)
_MEMOS: dict[PoolKey, dict[str, Any]] = {}  # pool key -> what the transports on it remember
_NO_BULK: dict[
    tuple, str
] = {}  # (pool key, keys offered) -> why OpenSSH could not upload (SFTP from then on)


class SSHTransport(Transport):
    """A device reached over SSH; many instances may share one pooled connection."""

    kind = "ssh"
    capabilities = (
        Capability.FORWARD
        | Capability.PROCESS_GROUPS
        | Capability.RESUMABLE_PUT
        | Capability.WINDOWS_SHELL
        | Capability.INTERACTIVE
    )

    def __init__(self, endpoint: Endpoint, hop: Hop, client: paramiko.Transport, *, timeout: float):
        self.endpoint = endpoint
        self.name = endpoint.name
        self.shell = endpoint.shell
        self.hop = hop
        self.timeout = timeout
        self._client = client
        self._lock = threading.Lock()
        self._sftp: paramiko.SFTPClient | None = None
        self._sftp_for: paramiko.Transport | None = None
        self._bulk: OpenSSHBulk | None = None
        self._closed = False

    # -- connection --------------------------------------------------------------------------

    @classmethod
    def open(cls, endpoint: Endpoint, options: TransportOptions) -> SSHTransport:
        return cls.connect(endpoint, **options.kwargs())

    @classmethod
    def connect(
        cls,
        endpoint: Endpoint,
        *,
        known_hosts: Path | None = None,
        timeout: float = 10.0,
        ssh_config: str | os.PathLike[str] | None = None,
    ) -> SSHTransport:
        """A transport bound to this process's pooled connection to ``endpoint`` (made if needed).

        Raises HostKeyError (unknown/changed key), SSHAuthError, SSHUnreachable.
        """
        hop = resolve_endpoint(endpoint, ssh_config=ssh_config, known_hosts=known_hosts)
        client = POOL.acquire(hop, timeout=timeout)
        return cls(endpoint, hop, client, timeout=timeout)

    @classmethod
    def check(cls, endpoint: Endpoint, timeout: float = 5.0, **options: Any) -> tuple[str, str | None]:
        """Reachability as a state: online, offline, untrusted or auth-failed, with a detail line."""
        try:
            t = cls.connect(endpoint, timeout=timeout, **options)
        except HostKeyError as e:
            return "untrusted", str(e)
        except SSHAuthError as e:
            return "auth-failed", str(e)
        except TransportError as e:
            return "offline", str(e)
        try:
            if t.shell is Shell.POWERSHELL:
                res = t.run_line(" ".join(encode_powershell("exit 0")), timeout=timeout)
            else:
                res = t.run(["true"], timeout=timeout)
        except RemoteTimeout:
            return "offline", f"{endpoint.name}: connected, but `true` did not finish within {timeout:g}s"
        except TransportError as e:
            return "offline", str(e)
        finally:
            t.close()
        if res.exit_code != 0:
            return (
                "offline",
                f"{endpoint.name}: connected, but `true` exited {res.exit_code}: {res.stderr.strip()}",
            )
        return "online", None

    @property
    def memo(self) -> dict[str, Any]:
        """Shared by every transport on this pooled connection (and kept across its reconnects)."""
        return _MEMOS.setdefault(self.hop.pool_key, {})

    @property
    def paramiko_transport(self) -> paramiko.Transport:
        return self._client

    def _reconnect(self, dead: paramiko.Transport) -> paramiko.Transport:
        with self._lock:
            if self._client is dead:
                POOL.release(self.hop)
                self._client = POOL.acquire(self.hop, timeout=self.timeout, dead=dead)
            return self._client

    def _open_channel(self, timeout: float) -> paramiko.Channel:
        """A session channel; if the pooled connection died, reconnect once and retry."""
        if self._closed:
            raise TransportError(f"{self.name}: transport is closed", remedy="connect again")
        client = self._client
        for attempt in (0, 1):
            try:
                if not client.is_active():
                    raise EOFError("connection lost")
                return client.open_session(
                    window_size=WINDOW_SIZE, max_packet_size=MAX_PACKET, timeout=timeout
                )
            except (paramiko.SSHException, EOFError, OSError) as e:
                if attempt:
                    raise TransportError(
                        f"{self.name}: cannot open an SSH channel: {e}",
                        remedy="check the device (`edgelab device check`) and its sshd's MaxSessions",
                    ) from e
                log.info("%s: pooled connection unusable (%s); reconnecting", self.name, e)
                client = self._reconnect(client)
        raise AssertionError("unreachable")

    def _exec(self, line: str, timeout: float) -> paramiko.Channel:
        chan = self._open_channel(timeout)
        guard = threading.Timer(timeout, chan.close)  # paramiko waits for the exec reply unbounded
        guard.daemon = True
        guard.start()
        try:
            chan.exec_command(line)
        except (paramiko.SSHException, EOFError, OSError) as e:
            chan.close()
            raise TransportError(f"{self.name}: the device refused to run the command: {e}") from e
        finally:
            guard.cancel()
        return chan

    def command_line(self, argv: Sequence[str]) -> str:
        """The exact line sshd hands to the login shell."""
        argv = [str(a) for a in argv]
        if self.shell is Shell.POWERSHELL:
            return winscripts.windows_line(winscripts.run_native(argv), self.windows_shell())
        return join_posix(posix_stream_argv(argv))

    # -- Windows -----------------------------------------------------------------------------

    def windows_shell(self) -> str:
        """The DefaultShell of a Windows host's OpenSSH (``cmd``, its default, or ``powershell``), asked once
        per connection with ``echo %OS%`` (cmd expands it); ``extra["windows_shell"]`` pins it."""
        endpoint = getattr(self, "endpoint", None)
        pinned = (endpoint.extra or {}).get("windows_shell") if endpoint is not None else "cmd"
        if pinned in ("cmd", "powershell"):
            return pinned
        key = self.hop.pool_key
        if key not in _LOGIN_SHELLS:
            res = self.run_line(winps.DETECT_LINE, timeout=self.timeout, label="shell detection")
            kind = winscripts.parse_detect(res.stdout)
            _LOGIN_SHELLS[key] = kind if kind != "unknown" else "cmd"  # encoded lines work under either
        return _LOGIN_SHELLS[key]

    def run_ps(self, script: str, *, timeout: float = 60.0, label: str | None = None) -> RunResult:
        """Run a PowerShell script (from ``winscripts``) on a Windows device, whatever its default shell."""
        line = winscripts.windows_line(script, self.windows_shell())
        return self.run_line(line, timeout=timeout, label=label or "powershell")

    # -- run / stream ------------------------------------------------------------------------

    def run(self, argv: Sequence[str], *, timeout: float = 60.0, input: bytes | None = None) -> RunResult:
        argv = tuple(str(a) for a in argv)
        res = self.run_line(
            self.command_line(argv), timeout=timeout, input=input, label=argv[0] if argv else ""
        )
        return RunResult(argv, res.exit_code, res.stdout, res.stderr, res.duration_s)

    def run_line(
        self, line: str, *, timeout: float = 60.0, input: bytes | None = None, label: str | None = None
    ) -> RunResult:
        """Run an already-quoted command line (built by ``command_line``); prefer ``run``."""
        start = time.monotonic()
        deadline = Deadline(timeout)
        chan = self._exec(line, min(timeout, self.timeout) or self.timeout)
        pump = Pump(chan)
        if input is None:
            chan.shutdown_write()
        else:
            threading.Thread(target=feed, args=(chan, input), daemon=True).start()
        if not pump.join(deadline.left()):
            self._terminate(chan, pump)
            raise RemoteTimeout(
                f"{label or line[:40]} ran past {timeout:g}s on {self.name} and was killed",
                remedy="raise the timeout or check the device's load",
            )
        code = exit_code(chan, max(5.0, deadline.left() or 0.0))
        chan.close()
        if code == -1 and not chan.get_transport().is_active():  # no exit-status ever came
            raise TransportError(
                f"{self.name}: the connection dropped while {label or 'a command'} ran; its outcome is unknown",
                remedy="check the device (`edgelab device check`) and run it again",
            )
        return RunResult(
            (line,),
            code,
            pump.out.decode("utf-8", "replace"),
            pump.err.decode("utf-8", "replace"),
            time.monotonic() - start,
        )

    def stream(self, argv: Sequence[str]) -> RemoteProcess:
        argv = [str(a) for a in argv]
        chan = self._exec(self.command_line(argv), self.timeout)
        return SSHProcess(self, chan)

    def kill_remote(self, pid: int, signal: str = "TERM") -> None:
        """Signal a remote process group over a second channel (closing a channel kills nothing);
        on Windows kill the process tree (``taskkill /T /F``: Windows has no TERM for a console program)."""
        try:
            if self.shell is Shell.POWERSHELL:
                self.run_ps(winscripts.kill_tree(pid), timeout=self.timeout, label="taskkill")
                return
            self.run_line(join_posix(posix_kill_argv(pid, signal)), timeout=self.timeout)
        except TransportError as e:
            log.info("%s: kill -%s %d failed: %s", self.name, signal, pid, e)

    def _terminate(self, chan: paramiko.Channel, pump: Pump) -> None:
        """TERM the remote group, KILL it after a grace period, then drop the channel.

        Windows: the stream's PowerShell printed its pid; its process tree is killed with taskkill /T.
        """
        if self.shell is Shell.POWERSHELL:
            pump.pid_known.wait(KILL_GRACE_S)
            if pump.pid is not None:
                self.kill_remote(pump.pid)
        else:
            pump.pid_known.wait(KILL_GRACE_S)
            if pump.pid is not None:
                self.kill_remote(pump.pid, "TERM")
                pump.join(KILL_GRACE_S)
                # Always: a group member that ignores TERM and closed its stdout keeps nothing open.
                self.kill_remote(pump.pid, "KILL")
        chan.close()
        pump.join(KILL_GRACE_S)

    def stream_ps(self, script: str) -> RemoteProcess:
        """Stream a PowerShell script's output; it prints its pid first, so cancel kills its tree."""
        line = winscripts.windows_line(f'"{winscripts.PID_MARKER}$PID"\n' + script, self.windows_shell())
        return SSHProcess(self, self._exec(line, self.timeout))

    # -- files -------------------------------------------------------------------------------

    def read_bytes(
        self, remote: str, offset: int = 0, max_bytes: int | None = None, *, tail: bool = False
    ) -> bytes:
        """Over SFTP (``remote`` as SFTP names it: ``/C:/...`` on Windows); b'' when absent."""
        try:
            with self.sftp().open(remote, "rb") as f:
                size = f.stat().st_size or 0
                start = max(0, size - max_bytes) if tail and max_bytes else min(offset, size)
                f.seek(start)
                want = (size - start) if max_bytes is None or tail else min(max_bytes, size - start)
                return f.read(want) if want > 0 else b""
        except FileNotFoundError:
            return b""
        except OSError as e:
            raise TransportError(
                f"{self.name}: cannot read {remote} over SFTP: {e}",
                remedy="the device's OpenSSH needs the sftp subsystem (default on Windows)",
            ) from e

    def sftp(self) -> paramiko.SFTPClient:
        """This transport's SFTP session (opened on first use, reopened after a reconnect)."""
        with self._lock:
            client = self._client
            if (
                self._sftp is not None
                and self._sftp_for is client
                and client.is_active()
                and not self._sftp.sock.closed  # a stalled upload gave its channel up
            ):
                return self._sftp
        for attempt in (0, 1):
            try:
                if not client.is_active():
                    raise EOFError("connection lost")
                sftp = open_client(client)
                break
            except (paramiko.SSHException, EOFError, OSError) as e:
                if attempt:
                    raise TransportError(
                        f"{self.name}: cannot start SFTP: {e}",
                        remedy="make sure the device's sshd has `Subsystem sftp` enabled",
                    ) from e
                client = self._reconnect(client)
        if sftp is None:
            raise TransportError(f"{self.name}: the server refused the sftp subsystem")
        channel = sftp.get_channel()
        if channel is not None:  # an open SFTP client always has one; the stubs say it may not
            channel.settimeout(max(self.timeout, 30.0))
        with self._lock:
            if self._sftp is not None:
                self._sftp.close()
            self._sftp, self._sftp_for = sftp, client
        return sftp

    def _put_whole(self, local: Path, remote: str, progress: Progress | None) -> str:
        return put_file(self.sftp(), local, remote, name=self.name, progress=progress)

    def _put_from(self, local: Path, remote: str, offset: int, progress: Progress | None) -> None:
        """Through the system ``ssh`` client where it may be used (``bulk``), else over SFTP; either
        way ``last_put_via`` says which, and why SFTP."""
        bulk, why = self._bulk_path()
        if bulk is not None:
            try:
                self.last_put_via = bulk.send(local, remote, offset, progress)
                return
            except BulkUnavailable as e:
                why = str(e)
                _NO_BULK[self._bulk_key] = why
                self._bulk = None
                forget(bulk)
                log.info("%s: OpenSSH bulk path unavailable (%s); using SFTP", self.name, why)
        put_from(self.sftp(), local, remote, offset, name=self.name, progress=progress)
        self.last_put_via = f"sftp (paramiko; {why})" if why else "sftp (paramiko)"

    def prepare_put(self) -> None:
        """Start the OpenSSH client of the next put now (``bulk``), when that path may be used."""
        bulk, _why = self._bulk_path()
        if bulk is not None:
            try:
                bulk.prepare()
            except BulkUnavailable as e:
                _NO_BULK[self._bulk_key] = str(e)
                self._bulk = None
                forget(bulk)

    def _jump_keys(self) -> list[tuple[Hop, paramiko.PKey]]:
        """Each jump host of this connection (outermost first) with the key verified for it: the
        paramiko session of hop i rides a channel of hop i-1's session."""
        hops: list[Hop] = []
        j = self.hop.jump[0] if self.hop.jump else None
        while j is not None:
            hops.append(j)
            j = j.jump[0] if j.jump else None
        keys: list[paramiko.PKey] = []
        t = self._client
        while isinstance(t.sock, paramiko.Channel):
            t = t.sock.get_transport()
            keys.append(t.get_remote_server_key())
        if len(keys) != len(hops):
            raise BulkUnavailable("the jump chain of the connection does not match its hops")
        return list(reversed(list(zip(hops, keys, strict=True))))

    @property
    def _bulk_key(self) -> tuple:
        return (self.hop.pool_key, self.hop.identity_files, self.hop.identities_only)

    def _bulk_path(self) -> tuple[OpenSSHBulk | None, str | None]:
        """This connection's OpenSSH uploader, or why there is none (the SFTP fallback's reason)."""
        if self._bulk is not None:
            return self._bulk, None
        if self.shell is Shell.POWERSHELL:
            return None, "Windows endpoint"
        if why := _NO_BULK.get(self._bulk_key):
            return None, why
        binary = ssh_binary()
        if binary is None:
            return None, switched_off()
        try:
            # the keys hostkeys.verify accepted on this connection: the only ones ssh will accept
            key = self._client.get_remote_server_key()
            jumps = self._jump_keys()
            self._bulk = bulk_for(
                self.hop, key, name=self.name, timeout=self.timeout, binary=binary, jumps=jumps
            )
        except BulkUnavailable as e:
            _NO_BULK[self._bulk_key] = str(e)
            return None, str(e)
        return self._bulk, None

    def get(self, remote: str, local: Path, *, progress: Progress | None = None) -> str:
        return get_file(self.sftp(), remote, Path(local), name=self.name, progress=progress)

    def interactive(self, *, term: str, columns: int, lines: int) -> SSHInteractive:
        """A login shell on a session channel with a pty of the terminal's size."""
        chan = self._open_channel(self.timeout)
        chan.get_pty(term=term, width=columns, height=lines)
        chan.invoke_shell()
        return SSHInteractive(chan)

    def forward(self, remote_port: int) -> Forward:
        """``ssh -L``: a direct-tcpip channel to the device's 127.0.0.1:``remote_port`` per connection."""
        from edgelab.transport.forward import ListenerForward

        def open_remote(peer: tuple[str, int]) -> paramiko.Channel:
            client = self._client
            if not client.is_active():
                client = self._reconnect(client)
            return client.open_channel(
                "direct-tcpip", ("127.0.0.1", int(remote_port)), peer, timeout=self.timeout
            )

        return ListenerForward(int(remote_port), open_remote, name=f"ssh-forward-{self.name}")

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sftp, self._sftp = self._sftp, None
            self._bulk = None  # the uploader stays with the pooled connection (bulk.close_all)
        if sftp is not None:
            try:
                sftp.close()
            except (OSError, EOFError, paramiko.SSHException):
                pass
        POOL.release(self.hop)
