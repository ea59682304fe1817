"""Who and where edgelab runs: the one reading of the user, the host and the process.

Every record of an owner is made from :func:`identity`, so two records of one process never
disagree on who or where it was. The stored forms (read back by other code, kept as they were):

- ``user@host``: a lease's holder (``edgelab.lease.owner.whoami``, with ``EDGELAB_OWNER`` over it)
  and a deployment's ``owner`` column;
- pid, host and start time: a run's owner columns and a follower's lease
  (``edgelab.deploy.owner.me``, which adds the start time that proves a pid gone);
- ``host:pid:nonce``: one follower's lease token, distinct even for two followers of one process.

A leaf: it imports nothing of edgelab.
"""

from __future__ import annotations

import getpass
import os
import socket
import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class Identity:
    user: str  # the OS user (``uid<N>`` where the passwd database has no name for it)
    host: str
    pid: int

    @property
    def user_at_host(self) -> str:
        return f"{self.user}@{self.host}"

    def token(self) -> str:
        """A fresh ``host:pid:nonce``: one holder among the holders of one process."""
        return f"{self.host}:{self.pid}:{uuid.uuid4().hex[:8]}"


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid{os.getuid()}"


def identity() -> Identity:
    """This process: its user, host and pid (read now: a forked process is another one)."""
    return Identity(_user(), socket.gethostname(), os.getpid())
