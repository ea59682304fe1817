"""The process that drives a run: its pid, host and start time, so another process can prove it gone.

A pid alone proves nothing (pids are reused), so the owner is recorded with its start time: on
Linux the boot id and the start tick from ``/proc/<pid>/stat``. An owner on this host is gone when
no process has its pid, the one that has it is a zombie, or it started at another time. An owner on
another host, or one whose start time cannot be read, is never declared gone (its lease's expiry
covers it): reaping must never touch a live command's work.
"""

from __future__ import annotations

import os
from typing import Any

from edgelab.identity import identity


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, str] | None:
    """(state letter, start tick) of a local process from /proc; None when there is no such process."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # after "pid (comm) ": state is field 3, starttime 22
    return (fields[0], fields[19]) if len(fields) > 19 else None


def start_of(pid: int) -> str | None:
    """``boot_id:start_tick`` of a local process (None where /proc is not there, or no such process)."""
    st, boot = _stat(pid), _boot_id()
    return f"{boot}:{st[1]}" if st and boot else None


def this_host() -> str:
    """This host as an owner record holds it (:func:`edgelab.identity.identity`, at most 255 characters)."""
    return identity().host[:255]


def me() -> dict[str, Any]:
    """The owner columns of a run driven by this process (:func:`edgelab.identity.identity`)."""
    i = identity()
    return {"owner_pid": i.pid, "owner_host": i.host[:255], "owner_start": start_of(i.pid)}


def gone(pid: int | None, host: str | None, start: str | None) -> bool:
    """True only when the owner is proven gone (see the module doc)."""
    if not pid or not host or host != this_host():
        return False
    st = _stat(pid)
    if st is None:
        if os.path.isdir("/proc"):
            return True  # /proc lists every process of this host: no such pid
        if os.name == "nt":
            return False  # os.kill would terminate it there
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False
    if st[0] in ("Z", "X"):
        return True  # dead, only not yet waited for
    return bool(start) and start_of(pid) not in (None, start)
