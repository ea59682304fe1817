"""``SessionTransport``: a push to an SSH device in one OpenSSH login, without paramiko.

Why: a fresh ``edgelab push`` asks the store one question and then streams the file into the
command that stores and hashes it (``DeviceStore.receive``). Over paramiko that costs its import,
its own login, a session per command, and a second login by the OpenSSH client that carries the
bytes. Here the system ``ssh`` logs in once (``session``) and serves every command; the login
starts when the transport is made, so it overlaps whatever the caller does first (taking the
device's lease). Nothing on this path imports paramiko.

Trust is edgelab's, unchanged: the keys written to the client's private known_hosts
(``pinned_client.ClientFiles``) are exactly the keys ``hostkeys.verify`` would accept for the hop: the
live (not ``@revoked``) entries for its name in the hop's own and the default known_hosts files,
narrowed to the device row's recorded fingerprint when it has one. No such key on file means no
session: the paramiko transport takes the push, and its check refuses the unknown key as
everywhere else. The hop is resolved by OpenSSH itself (``ssh_config.resolve_openssh``, ``ssh -G``)
with edgelab's rules on top, since OpenSSH makes the connection.

Where the session cannot serve (a jump host, a Windows endpoint, no ``ssh``, a key only paramiko
can use, a command that needs stdin or a stream), the transport opens the paramiko one and hands
it the work, so callers get the whole transport surface either way; ``via`` says which carried
the bytes. A host key other than the trusted ones is never a fallback: it raises HostKeyError.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgelab.errors import (
    BulkUnavailable,
    ConfigError,
    HostKeyError,
    SessionEnded,
    SSHNotAnswering,
    SSHUnreachable,
    TransportError,
)
from edgelab.transport.base import (
    Capability,
    Endpoint,
    Progress,
    RemoteProcess,
    RunResult,
    Transport,
    posix_kill_argv,
)
from edgelab.transport.options import SSHOptions
from edgelab.transport.quoting import Shell, join_posix
from edgelab.transport.ssh import known_hosts
from edgelab.transport.ssh.config import Hop, resolve_openssh
from edgelab.transport.ssh.openssh.pinned_client import (
    CIPHER_LINE,
    HOSTKEY_REFUSED,
    ClientFiles,
    PinnedKey,
    ssh_binary,
    switched_off,
    switched_off_by,
)
from edgelab.transport.ssh.openssh.session import LOOP, Session

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0  # when the options set none: SSHTransport.connect's default
# Files smaller than this go as a ``part`` (the login serves the next blob too); larger ones as
# the session's last ``fed``, whose bytes the device copies once less (``session``'s numbers).
KEEP_SESSION_BELOW = 128 << 20
ENV_SWITCH = "EDGELAB_SSH_SESSION"  # "off" (or 0/no/false): paramiko, the ssh binary for bytes only

# lower case, from ssh's log: it could not reach the host at all, so paramiko would only wait again
_UNREACHABLE = {
    "connection timed out": "timed out connecting to {where}",
    "connection refused": "connection refused at {where}",
    "no route to host": "{where} is unreachable (No route to host)",
}


def _timeout(options: SSHOptions) -> float:
    return options.timeout if options.timeout is not None else CONNECT_TIMEOUT_S


def trusted_keys(hop: Hop) -> list[PinnedKey]:
    """The keys ``hostkeys.verify`` would accept for ``hop``, read without paramiko."""
    files: list[str | Path] = [*hop.known_hosts, *known_hosts.default_files()]
    alias = hop.host_key_alias
    entries = known_hosts.lookup(files, alias or hop.host, 22 if alias else hop.port)
    revoked = {e.blob for e in entries if e.revoked}
    live = [e for e in entries if not e.revoked and e.blob not in revoked]
    if hop.expected_fingerprint:
        want = known_hosts.normalize_fingerprint(hop.expected_fingerprint)
        live = [e for e in live if e.fingerprint == want]
    return list(dict.fromkeys(PinnedKey(e.key_type, e.b64) for e in live))


def plan(endpoint: Endpoint, options: SSHOptions) -> tuple[Hop, list[PinnedKey], str] | str:
    """(hop, its trusted keys, the ssh binary) when a session may carry this endpoint, else why not."""
    if endpoint.kind != "ssh":
        return f"{endpoint.kind} endpoint"
    if endpoint.shell is not Shell.POSIX:
        return "Windows endpoint"
    if switched_off_by(ENV_SWITCH):
        return f"{ENV_SWITCH}={os.environ[ENV_SWITCH]}"
    binary = ssh_binary()
    if binary is None:
        return switched_off() or "no ssh client"
    try:
        hop = resolve_openssh(
            endpoint,
            binary=binary,
            ssh_config=options.ssh_config,
            known_hosts=options.known_hosts,
            timeout=min(_timeout(options), 5.0),
        )
    except ConfigError as e:
        return f"ssh -G: {e}"
    if hop.jump:
        return "a jump host on the way (the paramiko chain checks each hop)"
    keys = trusted_keys(hop)
    if not keys:
        return "no trusted host key on file"
    return hop, keys, binary


def start_session(endpoint: Endpoint, options: SSHOptions) -> SessionTransport | None:
    """A session transport for ``endpoint``, its login started, when one may carry it; else None
    (the reason is logged) and the caller opens the paramiko transport."""
    planned = plan(endpoint, options)
    if isinstance(planned, str):
        log.info("%s: no OpenSSH session (%s); using paramiko", endpoint.name, planned)
        return None
    hop, keys, binary = planned
    return SessionTransport(endpoint, options, hop, keys, binary=binary)


def open_session(endpoint: Endpoint, options: SSHOptions) -> Transport:
    """``start_session``'s transport, else the paramiko transport."""
    t = start_session(endpoint, options)
    if t is not None:
        return t
    from edgelab.transport.ssh.transport import SSHTransport

    return SSHTransport.open(endpoint, options)


class SessionTransport(Transport):
    """A device reached by one OpenSSH login at a time (``session``), paramiko only as fallback."""

    kind = "ssh"
    capabilities = Capability.FEED | Capability.RESUMABLE_PUT

    def __init__(
        self, endpoint: Endpoint, options: SSHOptions, hop: Hop, keys: Sequence[PinnedKey], *, binary: str
    ):
        self.endpoint, self.options, self.hop = endpoint, options, hop
        self.name = endpoint.name
        self.shell = Shell.POSIX
        self.timeout = _timeout(options)
        self.cipher: str | None = None
        self.logins = 0  # ssh processes started (one per session; a cut or a timeout starts another)
        self._fallback: Transport | None = None
        self._why_fallback: str | None = None
        self.files = ClientFiles([(hop, list(keys))], timeout=self.timeout, binary=binary)
        self._session: Session | None = self._start()

    @classmethod
    def open(cls, endpoint: Endpoint, options: Any) -> Transport:
        return open_session(endpoint, options)

    # -- the session and its fallback --------------------------------------------------------

    def _start(self) -> Session:
        self.logins += 1
        log.debug("%s: OpenSSH session login %d to %s", self.name, self.logins, self.hop.address)
        argv = self.files.argv(join_posix(["sh", "-c", LOOP, "edgelab-session"]))
        try:
            return Session(argv, self.files.dir / f"session-{self.logins}.log", name=self.name)
        except OSError as e:
            raise BulkUnavailable(f"cannot run {self.files.binary}: {e.strerror}") from e

    def _live(self) -> Session | None:
        """The session, logged in and waiting for a request; None once the paramiko transport
        took over (ssh could not log in). HostKeyError when ssh met another host key."""
        if self._fallback is not None:
            return None
        s = self._session
        if s is None or s.ended:
            s = self._session = self._start()
        try:
            if not s.ready:
                s.wait_ready(time.monotonic() + self.timeout + 5.0)
                log.debug("%s: OpenSSH session %d ready", self.name, self.logins)
            return s
        except SessionEnded:
            s.close(wait=5.0)
        except TransportError:  # no answer in time: as paramiko would say it, if it can reach it
            s.stop()
        self._check_log(s)
        self._take_over(f"ssh could not log in ({self._said(s)})")
        return None

    def _said(self, s: Session) -> str:
        said = [ln for ln in s.log_text().splitlines() if ln.strip() and not ln.startswith("debug")]
        return "; ".join(said)[-300:] or f"exit status {s.proc.returncode}"

    def _check_log(self, s: Session) -> None:
        """Raise for what ssh's log shows must not fall back: another host key, no route at all."""
        text = s.log_text().lower()
        if "timed out during banner exchange" in text:  # said as the paramiko path says it
            raise SSHNotAnswering(
                f"{self.name}: {self.hop.address} accepted the connection but sshd did not answer "
                f"within {self.timeout:g}s: frozen or hung",
                remedy="the host or its sshd hangs (SIGSTOPped, swapping, overloaded): check its "
                "console, restart sshd or reboot it, then retry",
            )
        for mark, why in _UNREACHABLE.items():
            if mark in text:
                raise SSHUnreachable(
                    f"{self.name}: {why.format(where=self.hop.address)}",
                    remedy="check that the device is powered, on the network and runs sshd "
                    "(`edgelab device check`)",
                )
        if any(m in text for m in HOSTKEY_REFUSED):
            shown = [ln for ln in s.log_text().splitlines() if "Server host key:" in ln]
            raise HostKeyError(
                f"{self.name}: the server at {self.hop.address} showed a host key other than the "
                f"trusted one ({shown[-1].split('Server host key:')[-1].strip() if shown else self._said(s)})",
                remedy=f"someone may be intercepting the connection; check the device, then "
                f"`edgelab device trust {self.name} --replace` if it was reinstalled",
            )

    def _take_over(self, why: str) -> Transport:
        """Hand the work to the paramiko transport from now on (opened once)."""
        if self._fallback is None:
            from edgelab.transport.ssh.transport import SSHTransport

            log.info("%s: %s; using paramiko", self.name, why)
            self._why_fallback = why
            if self._session is not None:
                self._session.close(wait=2.0)
            self._fallback = SSHTransport.open(self.endpoint, self.options)
        return self._fallback

    def _paramiko(self, what: str) -> Transport:
        return self._fallback or self._take_over(f"{what} needs the paramiko transport")

    # -- the transport surface ---------------------------------------------------------------

    @property
    def feeds(self) -> bool:
        return self._fallback.feeds if self._fallback is not None else True

    def run(self, argv: Sequence[str], *, timeout: float = 60.0, input: bytes | None = None) -> RunResult:
        start = time.monotonic()
        s = self._live() if input is None else None
        if s is None:
            t = self._fallback or self._paramiko("a command with stdin")
            return t.run(argv, timeout=timeout, input=input)
        ans = s.run(join_posix(argv), timeout=timeout)
        return RunResult(tuple(argv), ans.exit_code, ans.stdout, ans.stderr, time.monotonic() - start)

    def run_fed(
        self,
        argv: Sequence[str],
        local: Path,
        *,
        offset: int = 0,
        progress: Progress | None = None,
        timeout: float = 60.0,
    ) -> RunResult:
        start = time.monotonic()
        s = self._live()
        if s is None:
            assert self._fallback is not None
            return self._fallback.run_fed(argv, local, offset=offset, progress=progress, timeout=timeout)
        try:
            keep = Path(local).stat().st_size - offset < KEEP_SESSION_BELOW
        except OSError as e:
            raise TransportError(f"cannot read {local}: {e.strerror}") from e
        log.debug("%s: feeding %s from byte %d (%s)", self.name, local, offset, "part" if keep else "fed")
        ans, pos = s.run_fed(
            join_posix(argv), Path(local), offset=offset, progress=progress, timeout=timeout, keep=keep
        )
        log.debug("%s: the fed command answered (exit %d)", self.name, ans.exit_code)
        if s.ended:
            s.close(wait=5.0)
        if m := CIPHER_LINE.search(s.log_text()):
            self.cipher = m.group(1)
        self.last_put_via = f"openssh session ({self.cipher or 'cipher not logged'})"
        if ans.exit_code < 0:  # the session ended without an answer: the connection was cut
            self._check_log(s)
            raise TransportError(
                f"{self.name}: the upload of {local} was cut near byte {pos}: {self._said(s)}"
            )
        return RunResult(tuple(argv), ans.exit_code, ans.stdout, ans.stderr, time.monotonic() - start)

    def stream(self, argv: Sequence[str]) -> RemoteProcess:
        return self._paramiko("a streamed command").stream(argv)

    def _put_whole(self, local: Path, remote: str, progress: Progress | None) -> str:
        return self._paramiko("a whole-file put").put(local, remote, progress=progress)

    def _put_from(self, local: Path, remote: str, offset: int, progress: Progress | None) -> None:
        t = self._paramiko("a resumable put")
        t.put(local, remote, offset=offset, progress=progress)
        self.last_put_via = t.last_put_via

    def get(self, remote: str, local: Path, *, progress: Progress | None = None) -> str:
        return self._paramiko("a download").get(remote, local, progress=progress)

    def kill_remote(self, pid: int, signal: str = "TERM") -> None:
        self.run(posix_kill_argv(pid, signal), timeout=15)

    @property
    def fell_back(self) -> str | None:
        """Why the paramiko transport took over, or None while the session serves."""
        return self._why_fallback

    def close(self) -> None:
        if self._session is not None:
            self._session.close(wait=2.0)
            self._session = None
        if self._fallback is not None:
            self._fallback.close()
        self.files.close()
