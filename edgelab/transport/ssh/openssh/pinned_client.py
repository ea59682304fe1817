"""The system OpenSSH client, held to edgelab's own trust: its private config and known_hosts.

Used by both paths that hand bytes to the ``ssh`` binary (``bulk``: uploads beside a paramiko
connection; ``session_transport``: a whole fresh push in one login). Whatever the caller, the
client runs only as safe as edgelab's own connection:

* the host key: only the keys edgelab trusts for the hop are written to a private known_hosts, the
  only file ``ssh`` reads (``StrictHostKeyChecking yes``, ``GlobalKnownHostsFile /dev/null``, a
  fixed ``HostKeyAlias``, ``HostKeyAlgorithms`` of those keys' types, no DNS, no key update); a
  server that shows any other key is refused;
* the configuration is edgelab's: ``-F`` names the private config written here, so the user's
  ``~/.ssh/config`` cannot loosen it (no ProxyCommand, no ControlMaster, no forwarding);
* authentication by key or agent only, never a prompt (``BatchMode yes``); nothing secret on the
  command line or in a log.

Nothing here imports paramiko: a key is a ``PinnedKey`` (its type and base64 blob).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from edgelab.errors import BulkUnavailable
from edgelab.transport.ssh.config import Hop

ENV_SWITCH = "EDGELAB_SSH_BULK"  # "off" (or 0/no/false): never the ssh binary (SFTP, paramiko)
HOST_ALIAS = "edgelab-device"  # the known_hosts name of the device's trusted keys
DEFAULT_KEY_FILES = ("id_ed25519", "id_ecdsa", "id_rsa")  # tried in ~/.ssh unless IdentitiesOnly

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
# Key exchange: X25519 first, as edgelab's paramiko connection has always used. OpenSSH 9's
# default, the post-quantum hybrid sntrup761x25519, cost about 90 ms of client CPU per login on the
# lab host (measured: ``ssh true`` 0.25 s against 0.16 s). Every name here is known to OpenSSH 7.4
# and later clients, so an older lab host's ssh still reads the config.
KEX = (
    "curve25519-sha256",
    "curve25519-sha256@libssh.org",
    "ecdh-sha2-nistp256",
    "ecdh-sha2-nistp384",
    "ecdh-sha2-nistp521",
    "diffie-hellman-group-exchange-sha256",
    "diffie-hellman-group16-sha512",
    "diffie-hellman-group18-sha512",
    "diffie-hellman-group14-sha256",
)
_ALGOS_FOR_TYPE = {"ssh-rsa": "rsa-sha2-512,rsa-sha2-256"}

CIPHER_LINE = re.compile(r"kex: client->server cipher: (\S+)")
HOSTKEY_REFUSED = (  # lower case: what ssh prints when the server is not the trusted one
    "host key verification failed",
    "remote host identification has changed",
    "host key is known",
    "no matching host key type",
)


class PinnedKey(NamedTuple):
    """A host key ssh may accept for a hop: ``key_type`` (``ssh-ed25519``...) and its base64 blob."""

    key_type: str
    b64: str


def switched_off_by(var: str) -> bool:
    """Whether the environment variable ``var`` says "off" (or 0/no/false)."""
    return os.environ.get(var, "").strip().lower() in ("off", "0", "no", "false")


def ssh_binary() -> str | None:
    """The ``ssh`` client on PATH, unless ``EDGELAB_SSH_BULK`` turns its use off."""
    if switched_off_by(ENV_SWITCH):
        return None
    return shutil.which("ssh")


def switched_off() -> str | None:
    """Why the ssh binary is not used (``EDGELAB_SSH_BULK=off``, or none on PATH), else None."""
    if ssh_binary() is not None:
        return None
    off = os.environ.get(ENV_SWITCH)
    return f"{ENV_SWITCH}={off}" if off else "no ssh client on PATH"


def conf_value(text: str) -> str:
    """One ssh_config argument: ``%`` doubled (ssh expands tokens), quoted; a ``"`` or newline
    cannot be written, so the caller falls back."""
    if any(c in text for c in ('"', "\n", "\r")):
        raise BulkUnavailable(f"{text!r} cannot be written into an OpenSSH config")
    return '"' + text.replace("%", "%%") + '"'


def identity_files(hop: Hop) -> list[str]:
    """IdentityFile lines in the order paramiko offers keys (``auth.candidate_keys``)."""
    files = list(hop.identity_files)
    if not hop.identities_only:
        files += [str(Path("~/.ssh").expanduser() / n) for n in DEFAULT_KEY_FILES]
    return [f for f in dict.fromkeys(files) if os.path.isfile(f)]


def _block(
    alias: str, hop: Hop, keys: Sequence[PinnedKey], known_hosts: Path, timeout: float, via: str | None
) -> list[str]:
    """One Host block: every option that decides trust or auth for this hop set here."""
    if not keys:
        raise BulkUnavailable(f"no trusted host key for {hop.name}")
    algos = ",".join(dict.fromkeys(_ALGOS_FOR_TYPE.get(k.key_type, k.key_type) for k in keys))
    ids = identity_files(hop)
    if not ids and hop.identities_only:
        raise BulkUnavailable(f"no identity file to offer {hop.name} (IdentitiesOnly)")
    agent = bool(os.environ.get("SSH_AUTH_SOCK")) and not hop.identities_only
    return [
        f"Host {alias}",
        f"  HostName {conf_value(hop.host)}",
        f"  Port {int(hop.port)}",
        f"  User {conf_value(hop.user)}",
        f"  HostKeyAlias {alias}",
        f"  HostKeyAlgorithms {algos}",
        "  StrictHostKeyChecking yes",
        f"  UserKnownHostsFile {conf_value(str(known_hosts))}",
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
        f"  IdentitiesOnly {'no' if agent else 'yes'}",
        *(f"  IdentityFile {conf_value(f)}" for f in ids),
        "  AddKeysToAgent no",
        "  ForwardAgent no",
        "  ForwardX11 no",
        "  ClearAllForwardings yes",
        "  PermitLocalCommand no",
        # only ever a block of this file, checked the same way (with ProxyCommand set, even to
        # none, ssh would ignore ProxyJump: the first of the two obtained wins)
        f"  ProxyJump {via}" if via else "  ProxyCommand none",
        "  ControlMaster no",
        "  ControlPath none",
        "  RequestTTY no",
        "  EscapeChar none",
        "  Compression no",
        f"  KexAlgorithms {','.join(KEX)}",
        f"  Ciphers {','.join(CIPHERS)}",
        f"  ConnectTimeout {max(1, int(timeout))}",
        f"  ServerAliveInterval {max(1, int(hop.keepalive_s))}",
        "  ServerAliveCountMax 3",
        "  IPQoS throughput",
        "  LogLevel DEBUG1",  # the negotiated cipher is read from it; it holds no secret
    ]


def aliases(n_jumps: int) -> list[str]:
    """Host aliases of a chain, outermost jump host first, the device (``HOST_ALIAS``) last."""
    return [f"edgelab-jump-{i}" for i in range(n_jumps)] + [HOST_ALIAS]


Chain = Sequence[tuple[Hop, Sequence[PinnedKey]]]
"""Hops outermost jump host first, the device last, each with the keys ssh may accept for it."""


def client_config(chain: Chain, known_hosts: Path, *, timeout: float) -> str:
    """The private ssh_config for a hop chain: each hop reached through the one before it
    (``ProxyJump`` to that hop's block, which ``ssh`` reads from this same file: ``-F`` is passed
    on to the jump's own client)."""
    names = aliases(len(chain) - 1)
    lines: list[str] = []
    for i, (hop, keys) in enumerate(chain):
        lines += _block(names[i], hop, keys, known_hosts, timeout, names[i - 1] if i else None)
        lines.append("")
    return "\n".join(lines)


def known_hosts_text(chain: Chain) -> str:
    """One line per trusted key of each hop, under that hop's alias."""
    names = aliases(len(chain) - 1)
    return "".join(f"{names[i]} {k.key_type} {k.b64}\n" for i, (_h, keys) in enumerate(chain) for k in keys)


_DIR_PREFIX = "edgelab-ssh-"


def _collect_dead() -> None:
    """Remove the private directories of edgelab processes that are gone: one killed (SIGKILL, the
    OOM killer) or ended without running its exit handlers leaves its ``ClientFiles`` behind. Each
    directory is named by its process (``edgelab-ssh-<pid>-...``); a live pid keeps its own."""
    for d in Path(tempfile.gettempdir()).glob(f"{_DIR_PREFIX}*-*"):
        pid = d.name[len(_DIR_PREFIX) :].split("-", 1)[0]
        try:
            mine = d.is_dir() and d.stat().st_uid == os.getuid()
        except OSError:
            continue
        if not mine or not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                shutil.rmtree(d)
        except PermissionError:  # a live process of someone else's
            continue


class ClientFiles:
    """A private 0700 directory holding the config and known_hosts of one chain (removed on
    ``close``, and at exit; what a killed process left is removed by the next one): what ``argv``
    hands to ``ssh``."""

    def __init__(self, chain: Chain, *, timeout: float, binary: str):
        self.binary = binary
        _collect_dead()
        self.dir = Path(tempfile.mkdtemp(prefix=f"{_DIR_PREFIX}{os.getpid()}-"))  # 0700: ours alone
        atexit.register(self.close)
        try:
            self.known_hosts = self.dir / "known_hosts"
            self.known_hosts.write_text(known_hosts_text(chain))
            self.config = self.dir / "config"
            self.config.write_text(client_config(chain, self.known_hosts, timeout=timeout))
        except BaseException:
            self.close()
            raise

    def argv(self, remote_command: str) -> list[str]:
        """``ssh`` running ``remote_command`` (already quoted for the device's shell) on the device."""
        return [self.binary, "-F", str(self.config), "-T", HOST_ALIAS, remote_command]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            shutil.rmtree(self.dir)
        atexit.unregister(self.close)
