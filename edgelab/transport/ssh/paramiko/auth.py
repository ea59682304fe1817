"""SSH client authentication: which keys to offer, in OpenSSH's order, and the refusal message.

Only public-key authentication (IdentityFile, ssh-agent, ~/.ssh/id_*): edgelab never stores or
sends a password.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import paramiko

from edgelab.errors import SSHAuthError
from edgelab.transport.ssh.config import Hop
from edgelab.transport.ssh.openssh.pinned_client import DEFAULT_KEY_FILES

log = logging.getLogger(__name__)


def candidate_keys(hop: Hop) -> Iterator[tuple[str, paramiko.PKey]]:
    """Keys in OpenSSH's order: IdentityFile, the agent, then ~/.ssh/id_* defaults."""
    seen: set[bytes] = set()

    def from_file(path: str) -> Iterator[tuple[str, paramiko.PKey]]:
        try:
            key = paramiko.PKey.from_path(path)
        except FileNotFoundError:
            return
        except paramiko.PasswordRequiredException:
            log.info("skipping %s: it is encrypted; load it into ssh-agent", path)
            return
        except (paramiko.SSHException, OSError, ValueError) as e:
            log.info("skipping %s: %s", path, e)
            return
        if key.asbytes() not in seen:
            seen.add(key.asbytes())
            yield path, key

    for path in hop.identity_files:
        yield from from_file(path)
    if hop.identities_only:
        return
    if os.environ.get("SSH_AUTH_SOCK"):
        try:
            agent_keys: tuple[paramiko.PKey, ...] = tuple(paramiko.Agent().get_keys())
        except (paramiko.SSHException, OSError) as e:
            log.info("ssh-agent not usable: %s", e)
            agent_keys = ()
        for key in agent_keys:
            if key.asbytes() not in seen:
                seen.add(key.asbytes())
                yield "ssh-agent", key
    for name in DEFAULT_KEY_FILES:
        yield from from_file(str(Path("~/.ssh").expanduser() / name))


def authenticate(t: paramiko.Transport, hop: Hop) -> None:
    """Offer each candidate key until one is accepted; SSHAuthError naming what was tried."""
    tried: list[str] = []
    for source, key in candidate_keys(hop):
        tried.append(f"{key.get_name()} from {source}")
        try:
            t.auth_publickey(hop.user, key)
        except paramiko.AuthenticationException:
            continue
        if t.is_authenticated():
            return
    raise SSHAuthError(
        f"{hop.name}: {hop.user}@{hop.host}:{hop.port} refused every key"
        + (
            f" (tried {', '.join(tried)})"
            if tried
            else " (no key found: no IdentityFile, agent or ~/.ssh/id_*)"
        ),
        remedy="add your public key to ~/.ssh/authorized_keys on the device, load it into ssh-agent, "
        "or set IdentityFile in ~/.ssh/config",
    )
