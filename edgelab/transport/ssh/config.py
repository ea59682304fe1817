"""Resolve an SSH endpoint the way OpenSSH would: config files, then endpoint fields on top.

Sources, first obtained value wins (OpenSSH's rule): an explicit config file,
``~/.ssh/config``, then the virtual lab's generated ``ssh_config``. Fields set
on the Endpoint always win over any config value.
"""

from __future__ import annotations

import getpass
import glob
import io
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from edgelab.config import state_dir
from edgelab.errors import ConfigError
from edgelab.transport.base import Endpoint

if TYPE_CHECKING:
    import paramiko

DEFAULT_KEEPALIVE_S = 15.0


@dataclass(frozen=True)
class Hop:
    """One SSH hop, fully resolved: where to connect, as whom, with which keys and trust files."""

    name: str  # the name to show the operator (device name or jump spec)
    host: str
    port: int
    user: str
    identity_files: tuple[str, ...] = ()
    known_hosts: tuple[str, ...] = ()
    host_key_alias: str | None = None
    expected_fingerprint: str | None = None
    keepalive_s: float = DEFAULT_KEEPALIVE_S
    connect_timeout: float | None = None
    identities_only: bool = False  # IdentitiesOnly: no agent keys or ~/.ssh/id_* beyond the identity files
    jump: tuple[Hop, ...] = field(default=())

    @property
    def pool_key(self) -> tuple[str, str, int, tuple]:
        return (self.user, self.host, self.port, tuple(h.pool_key for h in self.jump))

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def sim_ssh_config_path() -> Path:
    """The virtual lab's generated ssh_config (``EDGELAB_SIM_DIR`` or ``<state>/sim``)."""
    base = os.environ.get("EDGELAB_SIM_DIR")
    return (Path(base) if base else state_dir() / "sim") / "ssh_config"


def config_files(explicit: str | os.PathLike | None = None) -> list[Path]:
    """The config files that exist, in precedence order."""
    files = []
    if explicit:
        files.append(Path(explicit).expanduser())
    files.append(Path("~/.ssh/config").expanduser())
    files.append(sim_ssh_config_path())
    return [f for f in files if f.is_file()]


def expand_includes(path: Path, notes: list[str] | None = None) -> str:
    """An ssh config's text with its ``Include`` files in place (``notes``: an Include that names no
    file, said rather than silently skipped)."""
    return "\n".join(_read_with_includes(Path(path), notes=notes)) + "\n"


def _read_with_includes(path: Path, depth: int = 0, notes: list[str] | None = None) -> list[str]:
    """The file's lines with every ``Include`` replaced by the files it names (paramiko has no Include).

    Relative names are taken from ``~/.ssh`` as OpenSSH does for user configs; globs are sorted.
    """
    if depth > 16:
        raise ConfigError(f"ssh config Include nesting too deep at {path}", remedy="look for an Include loop")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read ssh config {path}: {e}", remedy="fix or remove that file") from e
    out: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        words = line.strip().replace("=", " ", 1).split()
        if words and words[0].lower() == "include":
            for pattern in shlex.split(" ".join(words[1:])):
                pattern = os.path.expanduser(pattern)
                if not os.path.isabs(pattern):
                    pattern = str(Path("~/.ssh").expanduser() / pattern)
                found = [inc for inc in sorted(glob.glob(pattern)) if Path(inc).is_file()]
                if not found and notes is not None:
                    notes.append(f"{path}:{n}: Include {pattern} names no file; nothing read from it")
                for inc in found:
                    if notes is not None:
                        notes.append(f"{path}:{n}: read the hosts of {inc} (Include)")
                    out.extend(_read_with_includes(Path(inc), depth + 1, notes))
            continue
        out.append(line)
    return out


class Lookup(Protocol):
    """A resolved ssh config: the options for one alias, lower-case keys (paramiko's SSHConfig, or
    ``ssh -G`` through ``edgelab.transport.ssh.openssh_config``); the rules of ``resolve`` sit on top."""

    def lookup(self, alias: str, /) -> Mapping[str, Any]: ...


def load_config(explicit: str | os.PathLike | None = None) -> paramiko.SSHConfig:
    import paramiko  # here, not at the top: a resolve through ssh -G never pays its import

    cfg = paramiko.SSHConfig()
    for path in config_files(explicit):
        lines = [_shell_quoted_known_hosts(line) for line in _read_with_includes(path)]
        cfg.parse(io.StringIO("\n".join(lines) + "\n"))
    return cfg


_ONE_QUOTED_KNOWN_HOSTS = re.compile(r'^\s*(userknownhostsfile)(?:\s*=\s*|\s+)"([^"]*)"\s*$', re.IGNORECASE)


def _shell_quoted_known_hosts(line: str) -> str:
    """``UserKnownHostsFile "/a b/kh"`` handed to paramiko shell-quoted: paramiko strips the quotes of
    a value that is one quoted word, and ``_split_paths`` would then split it at the space (the
    virtual lab quotes its state dir, which may hold one)."""
    m = _ONE_QUOTED_KNOWN_HOSTS.match(line)
    return f"{m.group(1)} {shlex.quote(m.group(2))}" if m else line


def _split_paths(value: object) -> list[str]:
    if not value:
        return []
    items = value if isinstance(value, list) else shlex.split(str(value))
    return [str(Path(p).expanduser()) for p in items if p and p.lower() != "none"]


def parse_jump_spec(spec: str) -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` (also ``ssh://user@host:port`` and ``[v6]:port``) -> (user, host, port)."""
    s = spec.strip()
    if s.startswith("ssh://"):
        s = s[len("ssh://") :]
    user = None
    if "@" in s:
        user, s = s.rsplit("@", 1)
    port = None
    if s.startswith("["):
        host, _, rest = s[1:].partition("]")
        if rest.startswith(":"):
            port = rest[1:]
    elif s.count(":") == 1:
        host, port = s.split(":")
    else:
        host = s
    if not host:
        raise ConfigError(
            f"bad jump host {spec!r}", remedy="use [user@]host[:port], comma-separated for a chain"
        )
    try:
        return user, host, int(port) if port else None
    except ValueError:
        raise ConfigError(f"bad port in jump host {spec!r}", remedy="use [user@]host[:port]") from None


def resolve(
    endpoint: Endpoint,
    *,
    ssh_config: str | os.PathLike | None = None,
    known_hosts: str | os.PathLike | None = None,
    cfg: Lookup | None = None,
) -> Hop:
    """The hop chain for ``endpoint``: config values, overridden by endpoint fields."""
    cfg = cfg or load_config(ssh_config)
    alias = endpoint.ssh_host or endpoint.name
    extra_ids = _split_paths(endpoint.extra.get("identity_file"))
    extra_kh = _split_paths(endpoint.extra.get("known_hosts"))
    if known_hosts:
        extra_kh.append(str(Path(known_hosts).expanduser()))
    jump_spec = endpoint.ssh_jump
    fallback_ids: list[str] = []
    fallback_kh: list[str] = []
    if endpoint.ssh_host and endpoint.ssh_host != endpoint.name:
        # A device stored by address still finds the keys and trust files of a config block named
        # like the device (the virtual lab's ssh_config, ``device import ssh-config``); never its
        # HostName or Port, which the stored address already fixes.
        by_name = cfg.lookup(endpoint.name)
        fallback_ids = _split_paths(by_name.get("identityfile"))
        fallback_kh = _split_paths(by_name.get("userknownhostsfile"))
    return _resolve_hop(
        cfg,
        name=endpoint.name,
        alias=alias,
        user=endpoint.ssh_user,
        port=endpoint.ssh_port,
        jump_spec=jump_spec,
        extra_ids=extra_ids,
        extra_kh=extra_kh,
        fingerprint=endpoint.host_key_fingerprint,
        depth=0,
        fallback_ids=fallback_ids,
        fallback_kh=fallback_kh,
    )


def resolve_openssh(
    endpoint: Endpoint,
    *,
    binary: str,
    ssh_config: str | os.PathLike | None = None,
    known_hosts: str | os.PathLike | None = None,
    timeout: float = 5.0,
) -> Hop:
    """``resolve`` with OpenSSH's own reading of the same config files (``binary -G``), no paramiko.

    The same files in the same order (``config_files``), the same rules on top (endpoint fields
    win, ``extra`` keys and trust files, a device stored by address finds the keys of its named
    block, ProxyJump chains); each alias costs one ``ssh -G`` (ms, never a connection; a
    ``Match exec`` command runs, as it does under paramiko). Raises ConfigError when ssh refuses
    the config, times out or cannot run: the caller may fall back to ``resolve``.

    Where OpenSSH reads a config differently from paramiko, this follows OpenSSH, as the ssh that
    connects will (tests/transport/test_ssh_config_openssh.py checks each):

    - an unknown option, or a config file others can write, is an error (paramiko ignores both);
    - HostName comes back lower-cased;
    - time units count: ``ServerAliveInterval 1m`` is 60 s (paramiko: unreadable, so 15 s);
    - a value equal to ssh's default counts as unset: ``ServerAliveInterval 0`` keeps the 15 s
      keepalive (paramiko: 0);
    - without a User, the user is ssh's default, the account's passwd name (paramiko's path:
      ``getpass.getuser()``, $LOGNAME/$USER first; the same unless those name someone else);
    - ``~`` and ``%d`` in UserKnownHostsFile are the passwd home, not $HOME (ssh -G prints them
      expanded). A relative or ``~`` Include is $HOME under both; an IdentityFile's ``~``/``%d``,
      which -G leaves as written, are read as $HOME here as by paramiko;
    - in an IdentityFile ``%p``, ``%n``, ``%k``, ``%L``, ``%i`` and ``%%`` are expanded (paramiko
      leaves them), ``%l`` is the host name (paramiko: a looked-up FQDN), ``%C`` stays as written
      (paramiko: a hash of its own).
    """
    from edgelab.transport.ssh.openssh_config import OpenSSHConfig

    with OpenSSHConfig(binary, config_files(ssh_config), timeout=timeout) as cfg:
        cfg.start(endpoint.ssh_host or endpoint.name)
        if endpoint.ssh_host and endpoint.ssh_host != endpoint.name:
            cfg.start(endpoint.name)  # the fallback block's lookup, in parallel
        return resolve(endpoint, known_hosts=known_hosts, cfg=cfg)


def _resolve_hop(
    cfg: Lookup,
    *,
    name: str,
    alias: str,
    user: str | None,
    port: int | None,
    jump_spec: str | None,
    extra_ids: list[str],
    extra_kh: list[str],
    fingerprint: str | None,
    depth: int,
    fallback_ids: Sequence[str] = (),
    fallback_kh: Sequence[str] = (),
) -> Hop:
    if depth > 8:
        raise ConfigError(
            f"ProxyJump chain for {name} is too deep (a loop?)", remedy="check ProxyJump in ssh config"
        )
    c = cfg.lookup(alias)
    host = c.get("hostname", alias)
    try:
        port = int(port or c.get("port") or 22)
    except ValueError:
        raise ConfigError(f"bad Port for {alias} in ssh config", remedy="set a number") from None
    user = user or c.get("user") or getpass.getuser()
    ids = [*extra_ids, *_split_paths(c.get("identityfile")), *fallback_ids]
    kh = [*extra_kh, *_split_paths(c.get("userknownhostsfile")), *fallback_kh]
    keepalive = DEFAULT_KEEPALIVE_S
    if c.get("serveraliveinterval"):
        try:
            keepalive = float(c["serveraliveinterval"])
        except ValueError:
            pass
    connect_timeout = None
    if c.get("connecttimeout"):
        try:
            connect_timeout = float(c["connecttimeout"])
        except ValueError:
            pass
    spec = jump_spec if jump_spec is not None else c.get("proxyjump")
    jumps: list[Hop] = []
    if spec and spec.lower() != "none":
        for part in spec.split(","):
            j_user, j_alias, j_port = parse_jump_spec(part)
            # A jump host is its own config alias; it inherits only the keys and trust files given
            # explicitly for this endpoint (the virtual lab and tests rely on that), never a fingerprint.
            hop = _resolve_hop(
                cfg,
                name=part.strip(),
                alias=j_alias,
                user=j_user,
                port=j_port,
                jump_spec=None,
                extra_ids=extra_ids,
                extra_kh=extra_kh,
                fingerprint=None,
                depth=depth + 1,
            )
            # Earlier hops of the chain carry the later ones: hop i is reached through hops < i.
            jumps.append(_with_jump(hop, tuple(jumps)) if jumps else hop)
    return Hop(
        name=name,
        host=host,
        port=port,
        user=user,
        identity_files=tuple(dict.fromkeys(ids)),
        known_hosts=tuple(dict.fromkeys(kh)),
        host_key_alias=c.get("hostkeyalias"),
        expected_fingerprint=fingerprint,
        keepalive_s=keepalive,
        connect_timeout=connect_timeout,
        identities_only=str(c.get("identitiesonly", "no")).lower() == "yes",
        jump=(jumps[-1],) if jumps else (),
    )


def _with_jump(hop: Hop, chain: tuple[Hop, ...]) -> Hop:
    """``hop`` reached through the last hop of ``chain`` (which itself carries the earlier ones)."""
    from dataclasses import replace

    if hop.jump:  # the jump host's own ProxyJump from config: keep it, as OpenSSH does
        return hop
    return replace(hop, jump=(chain[-1],))


class ConfigText:
    """An OpenSSH client config read from text with paramiko's parser, for ``device import ssh-config``.

    Raises ValueError for text paramiko cannot parse; ``lookup`` may raise anything paramiko does for
    a ``Match``/``exec`` block it cannot evaluate."""

    def __init__(self, text: str) -> None:
        import paramiko

        try:
            self._cfg = paramiko.SSHConfig.from_text(text)
        except (ValueError, paramiko.ConfigParseError) as err:
            raise ValueError(str(err)) from err

    def hostnames(self) -> set[str]:
        """Every ``Host`` pattern named in the file."""
        return set(self._cfg.get_hostnames())

    def lookup(self, alias: str) -> dict[str, Any]:
        """The options that apply to ``alias`` (lower-case keys, as ssh_config(5) resolves them)."""
        return dict(self._cfg.lookup(alias))
