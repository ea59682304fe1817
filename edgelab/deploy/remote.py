"""The remote side of a deployment: detached launch, liveness, group kill, log reads, per OS family.

Linux and Android: each process starts under ``setsid`` (its own session and process group) with
``pid``, ``stdout.log``, ``stderr.log`` and ``exit`` files in its own directory of the run dir, so
anyone who can reach the device can find and stop it later. Windows: ``Start-Process -PassThru``
starts a PowerShell runner (environment, the program, its exit code into ``exit``) with stdout and
stderr redirected into the run dir and the pid written to ``pid``; stop is ``taskkill /T /F`` (the
process tree) verified over the tree by ParentProcessId; logs and pid files are read over SFTP.
Every script takes its values as positional arguments (POSIX) or quoted literals (PowerShell,
``edgelab.transport.winscripts``): nothing is spliced into shell text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from edgelab.errors import EdgelabError, TransportError
from edgelab.transport import winscripts
from edgelab.transport.base import Capability, RemoteProcess, RunResult, Transport
from edgelab.transport.quoting import Shell

# $1 workdir, $2.. argv (after an optional --secret-env: NAME=VALUE lines on stdin, exported, so a
# secret reaches the process's environment and never a command line). Prints the group leader's
# pid once the pid file is written.
_LAUNCH = r"""
d=$1; shift
if [ "$1" = --secret-env ]; then
  shift
  while IFS= read -r kv && [ -n "$kv" ]; do export "$kv" || exit 95; done
fi
mkdir -p "$d" && cd "$d" || exit 97
rm -f pid exit
if command -v setsid >/dev/null 2>&1; then S=setsid; else S=; fi
$S sh -c 'echo $$ > pid; "$@"; echo $? > exit' edgelab-run "$@" > stdout.log 2> stderr.log < /dev/null &
i=0
while [ ! -s pid ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
cat pid
"""

# $1 pgid: prints one line per live (non-zombie) member of the process group.
_MEMBERS = r"""
P=$1
for s in /proc/[0-9]*/stat; do
  read -r l < "$s" 2>/dev/null || continue
  r=${l##*) }
  set -- $r
  [ "$3" = "$P" ] && [ "$1" != Z ] && echo "${s#/proc/}"
done
true
"""

# $1 pgid, $2 grace seconds (integer): TERM the group, wait, KILL what is left, print the survivors.
_STOP = r"""
P=$1; G=$2
members() { for s in /proc/[0-9]*/stat; do read -r l < "$s" 2>/dev/null || continue; r=${l##*) }; set -- $r; [ "$3" = "$P" ] && [ "$1" != Z ] && echo x; done; }
kill -TERM -$P 2>/dev/null || kill -TERM $P 2>/dev/null
i=0
while [ -n "$(members)" ] && [ $i -lt $((G*10)) ]; do sleep 0.1; i=$((i+1)); done
if [ -n "$(members)" ]; then kill -KILL -$P 2>/dev/null; sleep 0.3; fi
echo "left $(members | wc -l)"
"""

# $1 file, $2 byte offset (1-based for tail -c +N): the bytes from there on.
LOG_TAIL_BYTES = 65536  # the tail of each log file kept with a run

_READ_FROM = r'[ -f "$1" ] && tail -c +"$2" "$1"; true'


@dataclass
class Poll:
    alive: bool
    text: str  # new stdout text since the offset
    exit_code: int | None


def _posix(script: str, *args: str) -> list[str]:
    return ["sh", "-c", script, "edgelab", *args]


def _ps(t: Transport, script: str, timeout: float = 30.0) -> RunResult:
    if not t.supports(Capability.WINDOWS_SHELL):
        raise TransportError(f"{t.name}: a Windows device needs an SSH transport")
    return t.run_ps(script, timeout=timeout)


def _sftp_path(path: str) -> str:
    """OpenSSH for Windows' SFTP name of a Windows path (``C:\\a\\b`` -> ``/C:/a/b``; ``/`` also separates)."""
    return "/" + path.replace("\\", "/").lstrip("/")


def _sftp_read(
    t: Transport, path: str, offset: int = 0, max_bytes: int | None = None, tail: bool = False
) -> bytes:
    """Bytes of a Windows file from ``offset`` (or its last ``max_bytes`` with ``tail``); b'' when absent."""
    try:
        sftp = t.sftp()  # type: ignore[attr-defined]
        with sftp.open(_sftp_path(path), "rb") as f:
            size = f.stat().st_size or 0
            start = max(0, size - max_bytes) if tail and max_bytes else min(offset, size)
            f.seek(start)
            want = (size - start) if max_bytes is None or tail else min(max_bytes, size - start)
            return f.read(want) if want > 0 else b""
    except FileNotFoundError:
        return b""
    except OSError as e:
        raise TransportError(
            f"{getattr(t, 'name', 'device')}: cannot read {path} over SFTP: {e}",
            remedy="the device's OpenSSH needs the sftp subsystem (default on Windows)",
        ) from e


def home(t: Transport) -> str:
    if t.shell is Shell.POWERSHELL:
        return winscripts.profile_dir(_ps(t, winscripts.env_bases(), 20).stdout) or ""
    return t.run(["sh", "-c", 'echo "$HOME"'], timeout=20).stdout.strip()


def run_root(t: Transport) -> str:
    """Where runs live on this device (DESIGN §7: ~/.edgelab on SSH hosts, /data/local/tmp/edgelab on Android)."""
    if t.shell is Shell.TOYBOX:
        return "/data/local/tmp/edgelab/runs"
    if t.shell is Shell.POWERSHELL:
        return home(t).rstrip("\\") + "\\.edgelab\\runs"
    return home(t).rstrip("/") + "/.edgelab/runs"


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
    if t.shell is Shell.POWERSHELL:
        if secret_env:
            raise TransportError(
                f"{t.name}: a Windows launch cannot take a secret off its command line",
                remedy="give the endpoint without credentials for a Windows device",
            )
        return _launch_windows(t, workdir, argv, env)
    full = (["env", *[f"{k}={v}" for k, v in env.items()]] if env else []) + list(argv)
    if secret_env:
        for k, v in secret_env.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) or "\n" in v or "\0" in v:
                raise TransportError(f"cannot pass the secret {k!r} by environment (a newline in it?)")
        lines = "".join(f"{k}={v}\n" for k, v in secret_env.items()) + "\n"
        res = t.run(_posix(_LAUNCH, workdir, "--secret-env", *full), timeout=30, input=lines.encode())
    else:
        res = t.run(_posix(_LAUNCH, workdir, *full), timeout=30)
    m = re.search(r"^(\d+)\s*$", res.stdout, re.M)
    if not res.ok or not m:
        raise TransportError(
            f"could not start {argv[0]} in {workdir} (exit {res.exit_code}): "
            f"{(res.stderr or res.stdout).strip()[:200]}",
            remedy="check the device's disk space and that the command exists there",
        )
    return int(m.group(1))


def pid_from_file(t: Transport, workdir: str) -> int | None:
    """The pid a launch wrote, for processes whose launch was interrupted before it reported back."""
    if t.shell is Shell.POWERSHELL:
        txt = _sftp_read(t, workdir.rstrip("\\/") + "\\pid").decode("ascii", "replace")
        m = re.search(r"(\d+)", txt)
        return int(m.group(1)) if m else None
    else:
        res = t.run(_posix('cat "$1/pid" 2>/dev/null; true', workdir), timeout=20)
    m = re.search(r"(\d+)", res.stdout)
    return int(m.group(1)) if m else None


def alive(t: Transport, pid: int) -> bool:
    """Whether any non-zombie member of the process group is left."""
    if t.shell is Shell.POWERSHELL:
        return "alive" in _ps(t, winscripts.alive(pid), 20).stdout
    return bool(t.run(_posix(_MEMBERS, str(int(pid))), timeout=20).stdout.strip())


def poll(t: Transport, workdir: str, pid: int, offset: int) -> Poll:
    """Liveness, new stdout since ``offset`` bytes, and the exit code once the process wrote it."""
    is_alive = alive(t, pid)
    if t.shell is Shell.POWERSHELL:
        wd = workdir.rstrip("\\/")
        out = _sftp_read(t, wd + "\\stdout.log", offset).decode("utf-8", "replace")
        code = None
        if not is_alive:
            txt = _sftp_read(t, wd + "\\exit").decode("ascii", "replace").strip()
            code = int(txt) if txt.lstrip("-").isdigit() else None
        return Poll(is_alive, out, code)
    out = t.run(_posix(_READ_FROM, f"{workdir}/stdout.log", str(offset + 1)), timeout=20).stdout
    code = None
    if not is_alive:
        txt = t.run(_posix('cat "$1/exit" 2>/dev/null; true', workdir), timeout=20).stdout.strip()
        code = int(txt) if txt.lstrip("-").isdigit() else None
    return Poll(is_alive, out, code)


def stop(t: Transport, pid: int, grace_s: int = 5) -> int:
    """TERM the group, KILL after ``grace_s``; returns how many members are left (0 = verified gone)."""
    if t.shell is Shell.POWERSHELL:
        res = _ps(t, winscripts.stop(pid), grace_s + 30)
        m = re.search(r"left\s+(\d+)", res.stdout)
        if not m:
            raise TransportError(
                f"could not verify that process tree {pid} is gone: {res.stderr.strip()[:200]}"
            )
        return int(m.group(1))
    res = t.run(_posix(_STOP, str(int(pid)), str(int(grace_s))), timeout=grace_s + 30)
    m = re.search(r"left\s+(\d+)", res.stdout)
    if not m:
        raise TransportError(f"could not verify that process group {pid} is gone: {res.stderr.strip()[:200]}")
    return int(m.group(1))


def read_file(t: Transport, path: str, max_bytes: int = 65536) -> str:
    """The last ``max_bytes`` of a remote file ('' when it does not exist)."""
    if t.shell is Shell.POWERSHELL:
        return _sftp_read(t, path, max_bytes=max_bytes, tail=True).decode("utf-8", "replace")
    return t.run(_posix('[ -f "$1" ] && tail -c "$2" "$1"; true', path, str(max_bytes)), timeout=30).stdout


def fetch_logs(t: Transport, workdirs: dict[str, str]) -> dict[str, str]:
    """The tails of each process's stdout and stderr (``name/stdout.log`` -> text); unreadable ones left out."""
    out = {}
    for name, wd in workdirs.items():
        for f in ("stdout.log", "stderr.log"):
            try:
                out[f"{name}/{f}"] = read_file(t, f"{wd}/{f}", LOG_TAIL_BYTES)
            except EdgelabError:
                pass
    return out


def read_from(t: Transport, path: str, offset: int, max_bytes: int, timeout: float = 30.0) -> str:
    """Up to ``max_bytes`` of a remote file from byte ``offset`` ('' when absent); SFTP on Windows."""
    if t.shell is Shell.POWERSHELL:
        return _sftp_read(t, path, offset, max_bytes).decode("utf-8", "replace")
    cmd = 'tail -c +"$2" "$1" 2>/dev/null | head -c "$3"; true'
    return t.run(["sh", "-c", cmd, "edgelab", path, str(offset + 1), str(max_bytes)], timeout=timeout).stdout


def follow_argv(path: str) -> list[str]:
    return ["tail", "-n", "+1", "-f", path]


def follow(t: Transport, path: str) -> RemoteProcess:
    """A remote file's lines from the start, then as they are written; cancel ends it."""
    if t.shell is Shell.POWERSHELL:
        return t.stream_ps(winscripts.follow_log(path))
    return t.stream(follow_argv(path))


def _launch_windows(t: Transport, workdir: str, argv: list[str], env: dict[str, str] | None = None) -> int:
    """Start-Process -PassThru of the runner (see ``winscripts.launch``); the pid it prints."""
    res = _ps(t, winscripts.launch(workdir, argv, env), 60)
    m = re.search(r"^(\d+)\s*$", res.stdout, re.M)
    if not res.ok or not m:
        raise TransportError(
            f"Start-Process failed for {argv[0]}: {(res.stderr or res.stdout).strip()[:200]}",
            remedy="check the path of the program on the Windows device",
        )
    return int(m.group(1))
