"""Bulk uploads through the system OpenSSH client, held to edgelab's own host-key trust.

Why: paramiko encrypts and frames every SSH packet in Python, so 256 MiB over SFTP costs about
1.3 s of client CPU on the lab host, more than ``rsync -e ssh`` takes for the whole job. The
``ssh`` binary does the same work in C with AES-NI, so a resumable put (``Transport.put`` with an
offset) sends its bytes through ``ssh DEVICE 'cat >> PART'`` with the local file itself as the
child's stdin: no byte passes through Python, and the shared file offset tells the progress.

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

Anything else falls back to SFTP (``BulkUnavailable``, with the reason the push reports): no
``ssh`` binary, a Windows (PowerShell) endpoint, a jump host, ``EDGELAB_SSH_BULK=off``, or an
``ssh`` that could not log in where paramiko could (an encrypted key that only paramiko's agent
path unlocks, a key file OpenSSH finds too open, ...).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import paramiko

from edgelab.errors import HostKeyError, TransportError
from edgelab.transport.base import Progress
from edgelab.transport.hostkeys import fingerprint
from edgelab.transport.quoting import join_posix
from edgelab.transport.ssh_config import Hop

# Client preference order (the client's first that the server has wins): AES-GCM uses AES-NI /
# the ARMv8 AES instructions and beat OpenSSH's default chacha20-poly1305 on the push bench
# (256 MiB over loopback); the rest stay offered so any server still negotiates.
CIPHERS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
)
ENV_SWITCH = "EDGELAB_SSH_BULK"  # "off" (or 0/no/false): always SFTP
HOST_ALIAS = "edgelab-device"  # the known_hosts name of the one trusted key
POLL_S = 0.05  # progress and cancel checks while ssh sends
READY, DONE = "edgelab-bulk-ready", "edgelab-bulk-done"
_ALGOS_FOR_TYPE = {"ssh-rsa": "rsa-sha2-512,rsa-sha2-256"}

# $1 = the file, $2 = offset. At 0 the file is created (its directory too, as SFTP's put does);
# otherwise it must exist and is cut to the offset (dd with no input truncates at seek), so what
# an earlier cut left beyond the verified prefix is gone. Then every byte of stdin is appended.
_RECEIVE = r"""
p=$1 off=$2
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


class BulkUnavailable(Exception):
    """The OpenSSH path cannot be used here; the message says why (the caller falls back to SFTP)."""


def ssh_binary() -> str | None:
    """The ``ssh`` client on PATH, unless ``EDGELAB_SSH_BULK`` turns the path off."""
    if os.environ.get(ENV_SWITCH, "").strip().lower() in ("off", "0", "no", "false"):
        return None
    return shutil.which("ssh")


def _conf_value(text: str) -> str:
    """One ssh_config argument: ``%`` doubled (ssh expands tokens), quoted; a ``"`` or newline
    cannot be written, so the path falls back."""
    if any(c in text for c in ('"', "\n", "\r")):
        raise BulkUnavailable(f"{text!r} cannot be written into an OpenSSH config")
    return '"' + text.replace("%", "%%") + '"'


def _identity_files(hop: Hop) -> list[str]:
    """IdentityFile lines in the order paramiko offers keys (``auth.candidate_keys``)."""
    from edgelab.transport.ssh.auth import DEFAULT_KEY_FILES

    files = list(hop.identity_files)
    if not hop.identities_only:
        files += [str(Path("~/.ssh").expanduser() / n) for n in DEFAULT_KEY_FILES]
    return [f for f in dict.fromkeys(files) if os.path.isfile(f)]


def client_config(hop: Hop, known_hosts: Path, host_key: paramiko.PKey, *, timeout: float) -> str:
    """The private ssh_config for ``hop``: every option that decides trust or auth set here."""
    algos = _ALGOS_FOR_TYPE.get(host_key.get_name(), host_key.get_name())
    ids = _identity_files(hop)
    lines = [
        f"Host {HOST_ALIAS}",
        f"  HostName {_conf_value(hop.host)}",
        f"  Port {int(hop.port)}",
        f"  User {_conf_value(hop.user)}",
        f"  HostKeyAlias {HOST_ALIAS}",
        f"  HostKeyAlgorithms {algos}",
        "  StrictHostKeyChecking yes",
        f"  UserKnownHostsFile {_conf_value(str(known_hosts))}",
        "  GlobalKnownHostsFile /dev/null",
        "  UpdateHostKeys no",
        "  CheckHostIP no",
        "  VerifyHostKeyDNS no",
        "  BatchMode yes",
        "  PreferredAuthentications publickey",
        "  PasswordAuthentication no",
        "  KbdInteractiveAuthentication no",
        "  HostbasedAuthentication no",
        "  GSSAPIAuthentication no",
        f"  IdentitiesOnly {'yes' if hop.identities_only or not os.environ.get('SSH_AUTH_SOCK') else 'no'}",
        *(f"  IdentityFile {_conf_value(f)}" for f in ids),
        "  AddKeysToAgent no",
        "  ForwardAgent no",
        "  ForwardX11 no",
        "  ClearAllForwardings yes",
        "  PermitLocalCommand no",
        "  ProxyCommand none",
        "  ProxyJump none",
        "  ControlMaster no",
        "  ControlPath none",
        "  RequestTTY no",
        "  EscapeChar none",
        "  Compression no",
        f"  Ciphers {','.join(CIPHERS)}",
        f"  ConnectTimeout {max(1, int(timeout))}",
        f"  ServerAliveInterval {max(1, int(hop.keepalive_s))}",
        "  ServerAliveCountMax 3",
        "  IPQoS throughput",
        "  LogLevel DEBUG1",  # the negotiated cipher is read from it; it holds no secret
    ]
    if not ids and hop.identities_only:
        raise BulkUnavailable("no identity file to offer (IdentitiesOnly)")
    return "\n".join(lines) + "\n"


_CIPHER_LINE = re.compile(r"kex: client->server cipher: (\S+)")
_HOSTKEY_REFUSED = (
    "Host key verification failed",
    "REMOTE HOST IDENTIFICATION HAS CHANGED",
    "host key is known",
    "No matching host key type",
)


class OpenSSHBulk:
    """Uploads to one device through ``ssh``; made per transport, its private files removed on ``close``."""

    def __init__(self, hop: Hop, host_key: paramiko.PKey, *, name: str, timeout: float, binary: str):
        self.hop, self.name, self.binary = hop, name, binary
        self.host_key = host_key
        self.dir = Path(tempfile.mkdtemp(prefix="edgelab-ssh-"))  # 0700: ours alone
        atexit.register(self.close)
        try:
            self.known_hosts = self.dir / "known_hosts"
            self.known_hosts.write_text(f"{HOST_ALIAS} {host_key.get_name()} {host_key.get_base64()}\n")
            self.config = self.dir / "config"
            self.config.write_text(client_config(hop, self.known_hosts, host_key, timeout=timeout))
        except BaseException:
            self.close()
            raise
        self.cipher: str | None = None  # negotiated, once a transfer ran
        self.running: subprocess.Popen | None = None  # the client while it sends (tests cut it)

    def describe(self) -> str:
        return f"openssh ({self.cipher or CIPHERS[0] + ' offered first'})"

    def argv(self, remote_line: str) -> list[str]:
        return [self.binary, "-F", str(self.config), "-T", HOST_ALIAS, remote_line]

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
        line = join_posix(["sh", "-c", _RECEIVE, "edgelab-receive", remote, str(offset)])
        err_path = self.dir / "stderr"
        with open(local, "rb") as fin, open(err_path, "wb") as err:
            fin.seek(offset)
            try:
                proc = subprocess.Popen(
                    self.argv(line), stdin=fin, stdout=subprocess.PIPE, stderr=err, start_new_session=True
                )
            except OSError as e:
                raise BulkUnavailable(f"cannot run {self.binary}: {e.strerror}") from e
            self.running = proc
            try:
                code = self._watch(proc, fin, total, progress)
            except BaseException:
                self._stop(proc)
                raise
            finally:
                self.running = None
            sent_to = os.lseek(fin.fileno(), 0, os.SEEK_CUR)
        out = proc.stdout.read().decode("utf-8", "replace") if proc.stdout else ""
        if proc.stdout:
            proc.stdout.close()
        log_text = err_path.read_text(encoding="utf-8", errors="replace")
        err_path.unlink(missing_ok=True)
        if m := _CIPHER_LINE.search(log_text):
            self.cipher = m.group(1)
        said = [ln for ln in log_text.splitlines() if ln.strip() and not ln.startswith("debug")]
        detail = "; ".join(said)[-300:] or f"exit status {code}"
        if READY not in out:
            if any(s in log_text for s in _HOSTKEY_REFUSED):
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
        if code != 0 or DONE not in out:
            raise TransportError(f"{self.name}: upload of {local} to {remote} cut near {sent_to}: {detail}")
        if sent_to != total:
            raise TransportError(
                f"{self.name}: {local} changed size while it was being pushed", remedy="push again"
            )
        if progress:
            progress(total, total)
        return self.describe()

    def _watch(self, proc: subprocess.Popen, fin, total: int, progress: Progress | None) -> int:
        """Wait for ``ssh``, reporting the position it has read the file to (the shared offset)."""
        fd = fin.fileno()
        last = -1
        while True:
            try:
                return proc.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                pass
            pos = min(os.lseek(fd, 0, os.SEEK_CUR), total)
            if progress and pos != last:
                last = pos
                progress(pos, total)  # may raise Interrupted (a Ctrl-C): _stop follows

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        """End the client (the device's ``cat`` sees the end of its input: what arrived stays)."""
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout:
            proc.stdout.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            shutil.rmtree(self.dir)
        atexit.unregister(self.close)
