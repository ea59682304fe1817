"""OpenSSH's own config resolution (``ssh -G``) as a lookup, so a hop resolves without paramiko.

``ssh -G`` prints every option it would use for a host without connecting (a few ms). It prints
defaults too, which paramiko's lookup leaves out; so a value equal to the one ``ssh -G -F
/dev/null`` prints (learnt once per binary, in parallel with the first lookup) counts as unset, and
``lookup`` returns what paramiko's would: lower-case keys, ``identityfile`` (a list) and
``userknownhostsfile`` (a list here) only where the config set them. ``user`` is the exception:
ssh's default, the account's passwd name, is kept, because it is whom ssh logs in as (the virtual
lab's config names that account, and a default must not turn it into $USER). Where ssh's own reading
still differs from paramiko's (listed in ``edgelab.transport.ssh.config.resolve_openssh``), this
gives ssh's.
"""

from __future__ import annotations

import getpass
import os
import signal
import socket
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from edgelab.errors import ConfigError

# Options whose every line is one more value; any other option's first line is its value.
_MULTI = frozenset({"identityfile", "certificatefile"})
_DEFAULTS: dict[str, dict[str, list[str]]] = {}  # per binary: the output of ``ssh -G -F /dev/null``


def _parse(out: str) -> dict[str, list[str]]:
    opts: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        if key:
            opts.setdefault(key.lower(), []).append(value)
    return opts


def _known_hosts_paths(value: str) -> list[str]:
    """``ssh -G`` prints the list unquoted: a word that is not absolute continues the previous path.

    ssh has already expanded ``~`` and ``%d`` there, so every path a config names by home or by
    root is absolute; a path with a space in it (the lab's quoted state dir) reads back whole."""
    paths: list[str] = []
    for word in value.split(" "):
        if paths and not word.startswith("/"):
            paths[-1] += " " + word
        elif word:
            paths.append(word)
    return paths


def _expand_tokens(path: str, opts: Mapping[str, Any], alias: str) -> str:
    """The ``%`` tokens of an IdentityFile that ``ssh -G`` leaves for connect time, as ssh_config(5)
    defines them; ``%d`` and ``%u`` as edgelab's defaults read them ($HOME, ``getpass.getuser()``).
    Tokens outside this set (``%C``, ``%j``, ``%T``) stay as written."""
    if "%" not in path:
        return path
    local = socket.gethostname()
    host = str(opts.get("hostname", alias))
    table = {
        "%": "%",
        "d": os.path.expanduser("~"),
        "h": host,
        "k": str(opts.get("hostkeyalias", host)),
        "i": str(os.getuid()),
        "l": local,
        "L": local.split(".")[0],
        "n": alias,
        "p": str(opts.get("port", "22")),
        "r": str(opts.get("user") or getpass.getuser()),
        "u": getpass.getuser(),
    }
    out, i = [], 0
    while i < len(path):
        if path[i] == "%" and i + 1 < len(path) and path[i + 1] in table:
            out.append(table[path[i + 1]])
            i += 2
        else:
            out.append(path[i])
            i += 1
    return "".join(out)


def _include_line(path: Path) -> str:
    text = str(path.absolute())
    if any(c in text for c in '"\n\r*?['):  # Include globs its argument and cannot quote a quote
        raise ConfigError(
            f"ssh config path {text!r} cannot be named in an OpenSSH Include (a quote, newline or glob character)",
            remedy="rename the file, or let edgelab read it with paramiko",
        )
    return f'Include "{text}"\n'


class OpenSSHConfig:
    """``ssh -G`` over ``files`` (first obtained value wins), one process per alias.

    The files are named by one private temporary config of ``Include`` lines, passed with ``-F``, so
    ssh reads neither ``~/.ssh/config`` nor ``/etc/ssh/ssh_config`` on its own. ``start`` launches a
    lookup early so several run at once; ``close`` (or the ``with`` block) removes the file."""

    def __init__(self, binary: str, files: Sequence[Path], *, timeout: float = 5.0) -> None:
        self.binary = binary
        self.timeout = timeout
        self._files = [Path(f) for f in files]
        self._config: str | None = None
        self._running: dict[str, subprocess.Popen[str]] = {}
        self._done: dict[str, dict[str, Any]] = {}

    def __enter__(self) -> OpenSSHConfig:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for proc in self._running.values():
            _stop(proc)
        self._running.clear()
        if self._config:
            Path(self._config).unlink(missing_ok=True)
            self._config = None

    def _config_file(self) -> str:
        if not self._files:
            return os.devnull  # ssh's defaults alone (its User among them), no file to write
        if self._config is None:
            lines = "".join(_include_line(f) for f in self._files)
            fd, name = tempfile.mkstemp(prefix="edgelab-ssh-", suffix=".conf")  # 0600, ours alone
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(lines)
            self._config = name
        return self._config

    def _spawn(self, config: str, alias: str) -> subprocess.Popen[str]:
        try:
            return subprocess.Popen(
                [self.binary, "-G", "-T", "-F", config, "--", alias],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,  # its own group: a timeout also stops a Match exec command
            )
        except OSError as e:
            raise ConfigError(
                f"cannot run {self.binary} -G: {e}", remedy="install the OpenSSH client (openssh-client)"
            ) from e

    def start(self, alias: str) -> None:
        """Launch the lookup of ``alias`` (and, the first time for this binary, of the defaults)."""
        if alias in self._done or alias in self._running:
            return
        _check_alias(alias)
        if self.binary not in _DEFAULTS and "\0defaults" not in self._running:
            self._running["\0defaults"] = self._spawn(os.devnull, alias)
        self._running[alias] = self._spawn(self._config_file(), alias)

    def _wait(self, key: str, alias: str) -> dict[str, list[str]]:
        proc = self._running.pop(key)
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
            raise ConfigError(
                f"{self.binary} -G {alias} did not answer within {self.timeout:g} s",
                remedy="look for a slow 'Match exec' command in the ssh config",
            ) from None
        if proc.returncode != 0:
            lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
            said = lines[0] if lines else f"exit status {proc.returncode}"
            raise ConfigError(
                f"ssh refuses the config for {alias!r}: {said}",
                remedy="fix that line of the ssh config (ssh -G HOST shows the same), or remove the file",
            )
        return _parse(out)

    def lookup(self, alias: str) -> dict[str, Any]:
        """The options the config files set for ``alias`` (lower-case keys, as paramiko's lookup)."""
        if alias not in self._done:
            self.start(alias)
            if "\0defaults" in self._running:
                _DEFAULTS[self.binary] = self._wait("\0defaults", alias)
            self._done[alias] = self._normalise(self._wait(alias, alias), alias)
        return dict(self._done[alias])

    def _normalise(self, opts: dict[str, list[str]], alias: str) -> dict[str, Any]:
        defaults = _DEFAULTS[self.binary]
        out: dict[str, Any] = {}
        for key, values in opts.items():
            if key == "host":
                continue
            if key == "hostname":
                # ssh's default HostName is the alias, lower-cased as ssh lower-cases every HostName
                if [v.lower() for v in opts.get("host", [])] != values:
                    out[key] = values[0]
            elif key == "user" or values != defaults.get(key):  # the default User is ssh's choice too
                out[key] = list(values) if key in _MULTI else values[0]
        if "userknownhostsfile" in out:
            out["userknownhostsfile"] = _known_hosts_paths(out["userknownhostsfile"])
        if "identityfile" in out:
            out["identityfile"] = [_expand_tokens(p, out, alias) for p in out["identityfile"]]
        return out


def _check_alias(alias: str) -> None:
    """ssh reads more than a name out of its destination argument; such an alias is not looked up."""
    if not alias or alias.startswith("-") or "@" in alias or alias.lower().startswith("ssh://"):
        raise ConfigError(
            f"{alias!r} is not a plain host name, and ssh -G would read it as options or user@host",
            remedy="store the device with its address or a config alias (no '@', no leading '-')",
        )


def _stop(proc: subprocess.Popen[str]) -> None:
    """Kill one lookup and whatever it started (its session's group is its own pid)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.communicate()
