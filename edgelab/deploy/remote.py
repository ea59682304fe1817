"""The remote side of a deployment: detached launch, liveness, group kill, log reads, per OS family.

Linux and Android: each process starts under ``setsid`` (its own session and process group) with
``pid``, ``stdout.log``, ``stderr.log`` and ``exit`` files in its own directory of the run dir, so
anyone who can reach the device can find and stop it later. Windows: ``Start-Process`` with
redirected output and the pid written to a file; stop is ``taskkill /T /F`` (the process tree).
Every script takes its values as positional arguments: nothing is spliced into shell text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from edgelab.errors import TransportError
from edgelab.transport.base import Transport
from edgelab.transport.quoting import Shell, encode_powershell, quote_powershell

# $1 workdir, $2.. argv. Prints the group leader's pid once the pid file is written.
_LAUNCH = r"""
d=$1; shift
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
_READ_FROM = r'[ -f "$1" ] && tail -c +"$2" "$1"; true'


@dataclass
class Poll:
    alive: bool
    text: str  # new stdout text since the offset
    exit_code: int | None


def _posix(script: str, *args: str) -> list[str]:
    return ["sh", "-c", script, "edgelab", *args]


def home(t: Transport) -> str:
    if t.shell is Shell.POWERSHELL:
        return t.run(encode_powershell("Write-Output $env:USERPROFILE"), timeout=20).stdout.strip()
    return t.run(["sh", "-c", 'echo "$HOME"'], timeout=20).stdout.strip()


def run_root(t: Transport) -> str:
    """Where runs live on this device (DESIGN §7: ~/.edgelab on SSH hosts, /data/local/tmp/edgelab on Android)."""
    if t.shell is Shell.TOYBOX:
        return "/data/local/tmp/edgelab/runs"
    if t.shell is Shell.POWERSHELL:
        return home(t).rstrip("\\") + "\\.edgelab\\runs"
    return home(t).rstrip("/") + "/.edgelab/runs"


def launch(t: Transport, workdir: str, argv: list[str], env: dict[str, str] | None = None) -> int:
    """Start ``argv`` detached in its own process group; returns the group leader's pid."""
    if t.shell is Shell.POWERSHELL:
        return _launch_windows(t, workdir, argv)
    full = (["env", *[f"{k}={v}" for k, v in env.items()]] if env else []) + list(argv)
    res = t.run(_posix(_LAUNCH, workdir, *full), timeout=30)
    m = re.search(r"^(\d+)\s*$", res.stdout, re.M)
    if not res.ok or not m:
        raise TransportError(f"could not start {argv[0]} in {workdir} (exit {res.exit_code}): "
                             f"{(res.stderr or res.stdout).strip()[:200]}",
                             remedy="check the device's disk space and that the command exists there")
    return int(m.group(1))


def pid_from_file(t: Transport, workdir: str) -> int | None:
    """The pid a launch wrote, for processes whose launch was interrupted before it reported back."""
    if t.shell is Shell.POWERSHELL:
        res = t.run(encode_powershell(f"Get-Content -ErrorAction SilentlyContinue {quote_powershell(workdir + chr(92) + 'pid')}"),
                    timeout=20)
    else:
        res = t.run(_posix('cat "$1/pid" 2>/dev/null; true', workdir), timeout=20)
    m = re.search(r"(\d+)", res.stdout)
    return int(m.group(1)) if m else None


def alive(t: Transport, pid: int) -> bool:
    """Whether any non-zombie member of the process group is left."""
    if t.shell is Shell.POWERSHELL:
        res = t.run(encode_powershell(f"if (Get-Process -Id {int(pid)} -ErrorAction SilentlyContinue) "
                                      "{ 'alive' } else { 'gone' }"), timeout=20)
        return "alive" in res.stdout
    return bool(t.run(_posix(_MEMBERS, str(int(pid))), timeout=20).stdout.strip())


def poll(t: Transport, workdir: str, pid: int, offset: int) -> Poll:
    """Liveness, new stdout since ``offset`` bytes, and the exit code once the process wrote it."""
    is_alive = alive(t, pid)
    if t.shell is Shell.POWERSHELL:
        return Poll(is_alive, "", None)
    out = t.run(_posix(_READ_FROM, f"{workdir}/stdout.log", str(offset + 1)), timeout=20).stdout
    code = None
    if not is_alive:
        txt = t.run(_posix('cat "$1/exit" 2>/dev/null; true', workdir), timeout=20).stdout.strip()
        code = int(txt) if txt.lstrip("-").isdigit() else None
    return Poll(is_alive, out, code)


def stop(t: Transport, pid: int, grace_s: int = 5) -> int:
    """TERM the group, KILL after ``grace_s``; returns how many members are left (0 = verified gone)."""
    if t.shell is Shell.POWERSHELL:
        t.run(["taskkill", "/T", "/F", "/PID", str(int(pid))], timeout=30)
        return 1 if alive(t, pid) else 0
    res = t.run(_posix(_STOP, str(int(pid)), str(int(grace_s))), timeout=grace_s + 30)
    m = re.search(r"left\s+(\d+)", res.stdout)
    if not m:
        raise TransportError(f"could not verify that process group {pid} is gone: {res.stderr.strip()[:200]}")
    return int(m.group(1))


def read_file(t: Transport, path: str, max_bytes: int = 65536) -> str:
    """The last ``max_bytes`` of a remote file ('' when it does not exist)."""
    if t.shell is Shell.POWERSHELL:
        return t.run(encode_powershell(f"Get-Content -Tail 500 -ErrorAction SilentlyContinue "
                                       f"{quote_powershell(path)}"), timeout=30).stdout
    return t.run(_posix('[ -f "$1" ] && tail -c "$2" "$1"; true', path, str(max_bytes)), timeout=30).stdout


def follow_argv(path: str) -> list[str]:
    return ["tail", "-n", "+1", "-f", path]


def _launch_windows(t: Transport, workdir: str, argv: list[str]) -> int:
    """Start-Process with redirected output; the pid goes to ``pid`` (untested against real Windows)."""
    wd = quote_powershell(workdir)
    args = ", ".join(quote_powershell(a) for a in argv[1:]) or "@()"
    script = (f"New-Item -ItemType Directory -Force -Path {wd} | Out-Null; "
              f"$p = Start-Process -FilePath {quote_powershell(argv[0])} -ArgumentList {args} "
              f"-WorkingDirectory {wd} -RedirectStandardOutput (Join-Path {wd} 'stdout.log') "
              f"-RedirectStandardError (Join-Path {wd} 'stderr.log') -WindowStyle Hidden -PassThru; "
              f"Set-Content -Path (Join-Path {wd} 'pid') -Value $p.Id; Write-Output $p.Id")
    res = t.run(encode_powershell(script), timeout=60)
    m = re.search(r"^(\d+)\s*$", res.stdout, re.M)
    if not m:
        raise TransportError(f"Start-Process failed for {argv[0]}: {(res.stderr or res.stdout).strip()[:200]}",
                             remedy="check the path of the program on the Windows device")
    return int(m.group(1))
