"""Every process a virtual lab started, found on the lab host and ended: nothing outlives the lab.

Virtual devices run their commands as processes of the lab host. A command normally ends with its
session; one whose session was cut (a killed emulator or sshd), or that detached on purpose (a
deployment), is found here by what it carries or where it lives, whatever database recorded it:

- its environment names the lab, inherited by every child: ``EDGELAB_SIM_LAB=<lab dir>`` from the
  ADB emulator, ``EDGELAB_PERSONA_DIR=<lab>/ssh/personas/NAME`` from the SSH personas;
- its mount namespace is a persona's, made of the lab's directories (``/proc/PID/mountinfo`` names
  them): a process that cleared its environment still pins those mounts, and is found by them.

:func:`sweep` TERMs them, KILLs what is left after a grace period and checks: when it returns, no
process of the lab is left, and with the last process of a persona namespace its mounts are gone.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from edgelab.errors import TransportError

LAB_MARK = "EDGELAB_SIM_LAB"
"""Set by the ADB emulator on every command it runs: the lab directory the command belongs to."""
_MARKS = (LAB_MARK, "EDGELAB_PERSONA_DIR")


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _ancestors() -> set[int]:
    """This process and its parents: never swept (``sim down`` may itself run inside a persona)."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        stat = _read(f"/proc/{pid}/stat")
        try:
            pid = int(stat.rsplit(b")", 1)[1].split()[1])
        except (IndexError, ValueError):
            break
    return out


def _alive(pid: int) -> bool:
    stat = _read(f"/proc/{pid}/stat")
    return bool(stat) and stat.rsplit(b")", 1)[1].split()[:1] != [b"Z"]


def _belongs(pid: int, root: bytes) -> bool:
    for var in _read(f"/proc/{pid}/environ").split(b"\0"):
        name, _, value = var.partition(b"=")
        if name.decode(errors="replace") in _MARKS and (value == root or value.startswith(root + b"/")):
            return True
    return root + b"/" in _read(f"/proc/{pid}/mountinfo")


def lab_processes(root: Path) -> list[int]:
    """Live processes of the lab whose state directory is ``root`` (see the module doc)."""
    mark = str(Path(root).resolve()).encode()
    mine = _ancestors()
    return [
        int(e)
        for e in os.listdir("/proc")
        if e.isdigit() and int(e) not in mine and _belongs(int(e), mark) and _alive(int(e))
    ]


def signal_all(pids: list[int], sig: int) -> None:
    """Send ``sig`` to each pid (one already gone, or not ours, is passed over)."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """The pids still alive (not zombies) after waiting up to ``timeout`` for them to end."""
    end = time.monotonic() + timeout
    left = [p for p in pids if _alive(p)]
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = [p for p in left if _alive(p)]
    return left


def sweep(root: Path, grace_s: float = 3.0) -> list[int]:
    """End every process of the lab at ``root``; returns the pids ended. Raises when one survives
    SIGKILL (another user's process in the namespace: the operator must look)."""
    found: list[int] = []
    for _round in range(3):  # a process may fork while its siblings end: look again
        pids = lab_processes(root)
        if not pids:
            return found
        found += [p for p in pids if p not in found]
        signal_all(pids, signal.SIGTERM)
        left = wait_gone(pids, grace_s)
        if left:
            signal_all(left, signal.SIGKILL)
            left = wait_gone(left, 3.0)
    left = lab_processes(root)
    if left:
        raise TransportError(
            f"processes of the virtual lab survived SIGKILL: {left}",
            remedy="see them with `ps -o pid,user,args -p PID` and end them by hand",
        )
    return found
