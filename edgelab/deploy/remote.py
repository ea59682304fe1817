"""The remote side of a deployment, as the deploy path calls it: each call asks the connection's host.

What differs per OS (detached launch, liveness, group or tree kill, log reads, the run root) lives in
:mod:`edgelab.transport.host`, chosen once per connection; these functions keep the deploy path's
vocabulary (and its one log-tail size) over it.
"""

from __future__ import annotations

from edgelab.errors import EdgelabError
from edgelab.transport.base import RemoteProcess, Transport
from edgelab.transport.host import Poll as Poll  # re-exported: what poll returns
from edgelab.transport.host import host_of

LOG_TAIL_BYTES = 65536  # the tail of each log file kept with a run


def home(t: Transport) -> str:
    return host_of(t).home()


def run_root(t: Transport) -> str:
    """Where runs live on this device (DESIGN §7: ~/.edgelab on SSH hosts, /data/local/tmp/edgelab on Android)."""
    return host_of(t).run_root()


def launch(
    t: Transport,
    workdir: str,
    argv: list[str],
    env: dict[str, str] | None = None,
    secret_env: dict[str, str] | None = None,
) -> int:
    """Start ``argv`` detached in its own process group; returns the group leader's pid.

    ``secret_env`` (an endpoint's password) travels on the launch command's stdin into the
    process's environment: on no command line, so no ``ps`` on the device shows it."""
    return host_of(t).launch(workdir, argv, env, secret_env)


def pid_from_file(t: Transport, workdir: str) -> int | None:
    """The pid a launch wrote, for processes whose launch was interrupted before it reported back."""
    return host_of(t).pid_from_file(workdir)


def alive(t: Transport, pid: int) -> bool:
    """Whether any non-zombie member of the process group (Windows: tree) is left."""
    return host_of(t).alive(pid)


def poll(t: Transport, workdir: str, pid: int, offset: int) -> Poll:
    """Liveness, new stdout since ``offset`` bytes, and the exit code once the process wrote it."""
    return host_of(t).poll(workdir, pid, offset)


def stop(t: Transport, pid: int, grace_s: int = 5) -> int:
    """TERM the group, KILL after ``grace_s``; returns how many members are left (0 = verified gone)."""
    return host_of(t).stop(pid, grace_s)


def read_file(t: Transport, path: str, max_bytes: int = 65536) -> str:
    """The last ``max_bytes`` of a remote file ('' when it does not exist)."""
    return host_of(t).read_tail(path, max_bytes)


def fetch_logs(t: Transport, workdirs: dict[str, str]) -> dict[str, str]:
    """The tails of each process's stdout and stderr (``name/stdout.log`` -> text); unreadable ones left out."""
    host = host_of(t)
    out = {}
    for name, wd in workdirs.items():
        for f in ("stdout.log", "stderr.log"):
            try:
                out[f"{name}/{f}"] = host.read_tail(f"{wd}/{f}", LOG_TAIL_BYTES)
            except EdgelabError:
                pass
    return out


def read_from(t: Transport, path: str, offset: int, max_bytes: int, timeout: float = 30.0) -> str:
    """Up to ``max_bytes`` of a remote file from byte ``offset`` ('' when absent); SFTP on Windows."""
    return host_of(t).read_range(path, offset, max_bytes, timeout=timeout)


def follow(t: Transport, path: str) -> RemoteProcess:
    """A remote file's lines from the start, then as they are written; cancel ends it."""
    return host_of(t).follow(path)
