"""The device's OS as the deploy path needs it: one host object per connection (``host_of``).

POSIX (Linux over SSH), Android (toybox over ADB) and Windows (PowerShell over SSH) differ in where
edgelab keeps its runs, how a detached process is started, found alive, stopped and read back, and
how a run's ``bin/`` is laid out. The OS is decided once, from the transport's shell, here; the
callers (deploy, bench, the follower, the device store) ask the host and never branch on a shell.

POSIX and Android: each process starts under ``setsid`` (its own session and process group) with
``pid``, ``stdout.log``, ``stderr.log`` and ``exit`` files in its own directory of the run dir, so
anyone who can reach the device can find and stop it later. Windows: ``Start-Process -PassThru``
starts a PowerShell runner (environment, the program, its exit code into ``exit``) with stdout and
stderr redirected into the run dir and the pid written to ``pid``; stop is ``taskkill /T /F`` (the
process tree) verified over the tree by ParentProcessId; logs and pid files are read with the
transport's ``read_bytes`` (SFTP). Every script takes its values as positional arguments (POSIX) or
quoted literals (PowerShell, ``winscripts``): nothing is spliced into shell text.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

from edgelab.errors import TransportError
from edgelab.transport import winscripts
from edgelab.transport.base import Capability, RemoteProcess, RunResult, Transport
from edgelab.transport.quoting import Shell, encode_powershell

ANDROID_BASE = "/data/local/tmp/edgelab"  # DESIGN §7: the shell user's home is not writable on Android
POSIX_BASE = "~/.edgelab"

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

# $1 pgid: "n rss_kB hwm_kB" summed / maxed over live members of the group.
_MEMORY = r"""
P=$1; rss=0; hwm=0; n=0
for s in /proc/[0-9]*/stat; do
  read -r l < "$s" 2>/dev/null || continue
  r=${l##*) }; set -- $r
  [ "$3" = "$P" ] || continue
  d=${s%/stat}
  while read -r k v _; do
    case $k in VmRSS:) rss=$((rss+v)); n=$((n+1));; VmHWM:) [ "$v" -gt "$hwm" ] && hwm=$v;; esac
  done < "$d/status"
done
echo "$n $rss $hwm"
"""

# $1 bin dir, then triples NAME BLOB X: link each blob into the dir, replacing stale links; X=1 marks
# a program the argv runs, made executable once (a chmod moves the blob's change time, so data
# files are left alone and stay trusted by the next push without a re-hash).
_LAYOUT = r"""
d=$1; shift
mkdir -p "$d" || exit 97
while [ $# -ge 3 ]; do
  [ -f "$2" ] || { echo "missing blob $2" >&2; exit 98; }
  case "$1" in */*) mkdir -p "$d/${1%/*}" || exit 97 ;; esac
  if [ "$3" = 1 ] && [ ! -x "$2" ]; then chmod 755 "$2" || exit 99; fi
  ln -sf "$2" "$d/$1" || exit 96
  shift 3
done
"""

_WRITE = 'd=$1; shift; mkdir -p "$d" || exit 97; while [ $# -ge 2 ]; do printf %s "$2" > "$d/$1" || exit 96; shift 2; done'


@dataclass
class Poll:
    alive: bool
    text: str  # new stdout text since the offset
    exit_code: int | None


@dataclass(frozen=True)
class Link:
    """One file of a laid-out directory: its name there, the store blob it points at, and whether
    the argv runs it (made executable where the OS has an execute bit)."""

    name: str
    blob: str
    program: bool = False


def _posix(script: str, *args: str) -> list[str]:
    return ["sh", "-c", script, "edgelab", *args]


def _left(res: RunResult, what: str) -> int:
    m = re.search(r"left\s+(\d+)", res.stdout)
    if not m:
        raise TransportError(f"could not verify that {what} is gone: {res.stderr.strip()[:200]}")
    return int(m.group(1))


class Host:
    """A device's OS behind one connection (POSIX here; :class:`AndroidHost`, :class:`WindowsHost`)."""

    family = "linux"  # the probe's collector family too
    sep = "/"
    sh = True  # commands run under a POSIX sh (scripts take their values as positional arguments)
    checks_ports = True  # ``ready.listening`` can ask it (ss/netstat over the shell)
    toybox = False
    secret_env = True  # a launch hands a process secrets by environment over stdin (``launch``)
    # the run root as a plan writes it before any connection asked the device its home
    planned_run_root = "~/.edgelab/runs"

    def __init__(self, t: Transport):
        self.t = t
        self._home: str | None = None

    # -- roots --------------------------------------------------------------------------------
    def home(self) -> str:
        if self._home is None:
            self._home = self.t.run(["sh", "-c", 'echo "$HOME"'], timeout=20).stdout.strip()
        return self._home

    def base(self) -> str:
        """edgelab's own folder on the device (DESIGN §7: ``~/.edgelab`` on SSH hosts)."""
        return self.home().rstrip("/") + "/.edgelab"

    def run_root(self) -> str:
        """Where runs live on this device; a run's directory is ``run_root()/RUN``."""
        return self.join(self.base(), "runs")

    def store_root(self) -> str | None:
        """The content store's root where the host knows it (Android: fixed; Windows: asked once);
        None on POSIX, where the store resolves ``~/.edgelab/store`` against $HOME itself (folding that
        question into its first command)."""
        return None

    def join(self, *parts: str) -> str:
        return posixpath.join(*parts)

    # -- processes ----------------------------------------------------------------------------
    def launch(
        self,
        workdir: str,
        argv: Sequence[str],
        env: dict[str, str] | None = None,
        secret_env: dict[str, str] | None = None,
    ) -> int:
        """Start ``argv`` detached in its own process group; returns the group leader's pid.
        ``secret_env`` goes to the process's environment over the command's stdin, never its argv."""
        full = (["env", *[f"{k}={v}" for k, v in env.items()]] if env else []) + list(argv)
        if secret_env:
            for k, v in secret_env.items():
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) or "\n" in v or "\0" in v:
                    raise TransportError(f"cannot pass the secret {k!r} by environment (a newline in it?)")
            lines = "".join(f"{k}={v}\n" for k, v in secret_env.items()) + "\n"
            res = self.t.run(
                _posix(_LAUNCH, workdir, "--secret-env", *full), timeout=30, input=lines.encode()
            )
        else:
            res = self.t.run(_posix(_LAUNCH, workdir, *full), timeout=30)
        m = re.search(r"^(\d+)\s*$", res.stdout, re.M)
        if not res.ok or not m:
            raise TransportError(
                f"could not start {argv[0]} in {workdir} (exit {res.exit_code}): "
                f"{(res.stderr or res.stdout).strip()[:200]}",
                remedy="check the device's disk space and that the command exists there",
            )
        return int(m.group(1))

    def pid_from_file(self, workdir: str) -> int | None:
        """The pid a launch wrote, for processes whose launch was interrupted before it reported back."""
        res = self.t.run(_posix('cat "$1/pid" 2>/dev/null; true', workdir), timeout=20)
        m = re.search(r"(\d+)", res.stdout)
        return int(m.group(1)) if m else None

    def alive(self, pid: int) -> bool:
        """Whether any non-zombie member of the process group is left."""
        return bool(self.t.run(_posix(_MEMBERS, str(int(pid))), timeout=20).stdout.strip())

    def exit_code(self, workdir: str) -> int | None:
        txt = self.t.run(_posix('cat "$1/exit" 2>/dev/null; true', workdir), timeout=20).stdout.strip()
        return int(txt) if txt.lstrip("-").isdigit() else None

    def poll(self, workdir: str, pid: int, offset: int) -> Poll:
        """Liveness, new stdout since ``offset`` bytes, and the exit code once the process wrote it."""
        is_alive = self.alive(pid)
        out = self.read_range(self.join(workdir, "stdout.log"), offset, timeout=20)
        return Poll(is_alive, out, None if is_alive else self.exit_code(workdir))

    def stop(self, pid: int, grace_s: int = 5) -> int:
        """TERM the group, KILL after ``grace_s``; returns how many members are left (0 = verified gone)."""
        res = self.t.run(_posix(_STOP, str(int(pid)), str(int(grace_s))), timeout=grace_s + 30)
        return _left(res, f"process group {pid}")

    def memory(self, pgid: int) -> tuple[int | None, int | None]:
        """(resident bytes now, peak bytes of the largest member); (None, None) when unknown or gone."""
        parts = self.t.run(_posix(_MEMORY, str(int(pgid))), timeout=20).stdout.split()
        if len(parts) != 3 or not all(p.isdigit() for p in parts) or parts[0] == "0":
            return None, None
        return int(parts[1]) * 1024, int(parts[2]) * 1024

    def mem_available(self, timeout: float = 20.0) -> int | None:
        """Memory available to new work now, in bytes (``MemAvailable``); None where it is not said."""
        out = self.t.run(["sh", "-c", "grep -E '^MemAvailable:' /proc/meminfo"], timeout=timeout).stdout
        parts = out.split()
        return int(parts[1]) * 1024 if len(parts) > 1 and parts[1].isdigit() else None

    def clock(self) -> float:
        """The device's clock now (seconds since the epoch)."""
        out = self.t.run(["date", "+%s.%N"], timeout=20).stdout.strip()
        try:
            return float(out)
        except ValueError:  # no %N on this date(1): whole seconds
            return float(self.t.run(["date", "+%s"], timeout=20).stdout.strip())

    @classmethod
    def system_log_argv(cls, lines: int, follow: bool) -> list[str]:
        """The command that prints (or follows) the device's system log: ``journalctl`` (``dmesg``
        where there is no journal)."""
        probe = "command -v journalctl >/dev/null 2>&1 && journalctl -q -n 0 >/dev/null 2>&1"
        if follow:
            script = f"if {probe}; then exec journalctl --no-pager -n {lines} -f; else exec dmesg -w; fi"
        else:
            script = (
                f"if {probe}; then exec journalctl --no-pager -n {lines}; else dmesg | tail -n {lines}; fi"
            )
        return ["sh", "-c", script]

    @classmethod
    def script_argv(cls, script: str) -> list[str]:
        """The argv that runs a script in this host's shell (``sh -c``; PowerShell ``-EncodedCommand``)."""
        return ["sh", "-c", script]

    # -- files --------------------------------------------------------------------------------
    def read_tail(self, path: str, max_bytes: int = 65536) -> str:
        """The last ``max_bytes`` of a remote file ('' when it does not exist)."""
        return self.t.run(
            _posix('[ -f "$1" ] && tail -c "$2" "$1"; true', path, str(max_bytes)), timeout=30
        ).stdout

    def read_range(self, path: str, offset: int, max_bytes: int | None = None, timeout: float = 30.0) -> str:
        """Up to ``max_bytes`` (None: all) of a remote file from byte ``offset`` ('' when absent)."""
        if max_bytes is None:
            script = '[ -f "$1" ] && tail -c +"$2" "$1"; true'
            return self.t.run(_posix(script, path, str(offset + 1)), timeout=timeout).stdout
        cmd = 'tail -c +"$2" "$1" 2>/dev/null | head -c "$3"; true'
        return self.t.run(_posix(cmd, path, str(offset + 1), str(max_bytes)), timeout=timeout).stdout

    def follow(self, path: str) -> RemoteProcess:
        """A remote file's lines from the start, then as they are written; cancel ends it."""
        return self.t.stream(["tail", "-n", "+1", "-f", path])

    def layout(self, bin_dir: str, links: Sequence[Link]) -> None:
        """Make ``bin_dir`` hold one link per file (name -> store blob)."""
        pairs = [x for ln in links for x in (ln.name, ln.blob, "1" if ln.program else "0")]
        res = self.t.run(["sh", "-c", _LAYOUT, "edgelab-layout", bin_dir, *pairs], timeout=60)
        if not res.ok:
            raise TransportError(
                f"could not lay out {bin_dir} (exit {res.exit_code}): {res.stderr.strip()[:200]}",
                remedy="check the device's disk space and the store's permissions",
            )

    def write_files(self, workdir: str, files: dict[str, str]) -> None:
        """Generated files (name -> text) into ``workdir``."""
        pairs = [x for name, text in sorted(files.items()) for x in (name, text)]
        res = self.t.run(["sh", "-c", _WRITE, "edgelab-files", workdir, *pairs], timeout=60)
        if not res.ok:
            raise TransportError(
                f"could not write {', '.join(files)} into {workdir} (exit {res.exit_code}): "
                f"{res.stderr.strip()[:200]}",
                remedy="check the device's disk space",
            )


class AndroidHost(Host):
    """Android (toybox over ADB): edgelab's folder is under ``/data/local/tmp``."""

    family = "android"
    toybox = True
    planned_run_root = ANDROID_BASE + "/runs"

    def base(self) -> str:
        return ANDROID_BASE

    def store_root(self) -> str | None:
        return ANDROID_BASE + "/store"

    @classmethod
    def system_log_argv(cls, lines: int, follow: bool) -> list[str]:
        """logcat's own tail (-t) and follow-from-tail (-T)."""
        return ["logcat", "-T", str(lines)] if follow else ["logcat", "-d", "-t", str(lines)]


class WindowsHost(Host):
    """Windows (PowerShell over SSH): processes through ``winscripts``, files read over SFTP."""

    family = "windows"
    sep = "\\"
    sh = False
    checks_ports = False
    secret_env = False  # its launch script travels on a command line: no way in but argv
    planned_run_root = "%USERPROFILE%\\.edgelab\\runs"

    def _ps(self, script: str, timeout: float = 30.0) -> RunResult:
        if not self.t.supports(Capability.WINDOWS_SHELL):
            raise TransportError(f"{self.t.name}: a Windows device needs an SSH transport")
        return self.t.run_ps(script, timeout=timeout)

    def home(self) -> str:
        if self._home is None:
            self._home = winscripts.profile_dir(self._ps(winscripts.env_bases(), 20).stdout) or ""
        return self._home

    def base(self) -> str:
        return self.home().rstrip("\\") + "\\.edgelab"

    def store_root(self) -> str | None:
        return self.store_base()[0]

    def store_base(self) -> tuple[str, str]:
        """(store root, the variable it came from): %LOCALAPPDATA%\\edgelab\\store for a user with a
        profile; a service account without one gets %ProgramData%\\edgelab\\store, else %TEMP%\\edgelab\\store."""
        res = self._ps(winscripts.env_bases(), 30)
        base, var = winscripts.pick_base(res.stdout) if res.ok else (None, None)
        if not base:
            raise TransportError(
                f"{self.t.name}: %LOCALAPPDATA%, %ProgramData% and %TEMP% are all empty: no place for the store",
                remedy="log in as an account with a profile, or give the device a store root (open_store(root=...))",
            )
        return base.rstrip("\\") + "\\edgelab\\store", var or ""

    def join(self, *parts: str) -> str:
        return "\\".join([p.rstrip("\\/") for p in parts[:-1]] + [parts[-1]])

    @staticmethod
    def transfer_path(path: str) -> str:
        """OpenSSH for Windows' SFTP name of a Windows path (``C:\\a\\b`` -> ``/C:/a/b``; ``/`` also separates)."""
        return "/" + path.replace("\\", "/").lstrip("/")

    def _read(self, path: str, offset: int = 0, max_bytes: int | None = None, tail: bool = False) -> str:
        data = self.t.read_bytes(self.transfer_path(path), offset, max_bytes, tail=tail)
        return data.decode("utf-8", "replace")

    def launch(
        self,
        workdir: str,
        argv: Sequence[str],
        env: dict[str, str] | None = None,
        secret_env: dict[str, str] | None = None,
    ) -> int:
        """Start-Process -PassThru of the runner (see ``winscripts.launch``); the pid it prints."""
        if secret_env:
            raise TransportError(
                f"{self.t.name}: a Windows launch cannot take a secret off its command line",
                remedy="give the endpoint without credentials for a Windows device",
            )
        res = self._ps(winscripts.launch(workdir, argv, env), 60)
        m = re.search(r"^(\d+)\s*$", res.stdout, re.M)
        if not res.ok or not m:
            raise TransportError(
                f"Start-Process failed for {argv[0]}: {(res.stderr or res.stdout).strip()[:200]}",
                remedy="check the path of the program on the Windows device",
            )
        return int(m.group(1))

    def pid_from_file(self, workdir: str) -> int | None:
        m = re.search(r"(\d+)", self._read(workdir.rstrip("\\/") + "\\pid"))
        return int(m.group(1)) if m else None

    def alive(self, pid: int) -> bool:
        return "alive" in self._ps(winscripts.alive(pid), 20).stdout

    def exit_code(self, workdir: str) -> int | None:
        txt = self._read(workdir.rstrip("\\/") + "\\exit").strip()
        return int(txt) if txt.lstrip("-").isdigit() else None

    def poll(self, workdir: str, pid: int, offset: int) -> Poll:
        is_alive = self.alive(pid)
        out = self._read(workdir.rstrip("\\/") + "\\stdout.log", offset)
        return Poll(is_alive, out, None if is_alive else self.exit_code(workdir))

    def stop(self, pid: int, grace_s: int = 5) -> int:
        return _left(self._ps(winscripts.stop(pid), grace_s + 30), f"process tree {pid}")

    def memory(self, pgid: int) -> tuple[int | None, int | None]:
        if not self.t.supports(Capability.WINDOWS_SHELL):
            return None, None
        parts = self.t.run_ps(winscripts.tree_memory(pgid), timeout=20).stdout.split()
        if len(parts) != 3 or not all(p.isdigit() for p in parts) or parts[0] == "0":
            return None, None
        return int(parts[1]), int(parts[2]) * 1024  # working set in bytes, peak in KiB

    def mem_available(self, timeout: float = 20.0) -> int | None:
        """Free physical memory (Win32_OperatingSystem, in KiB), in bytes."""
        script = "(Get-CimInstance Win32_OperatingSystem).FreePhysicalMemory"
        out = self.t.run(["powershell", "-NoProfile", "-Command", script], timeout=timeout).stdout.strip()
        return int(out) * 1024 if out.isdigit() else None

    def clock(self) -> float:
        return int(self.t.run_ps(winscripts.clock_ms(), timeout=20).stdout.strip()) / 1000.0

    def read_tail(self, path: str, max_bytes: int = 65536) -> str:
        return self._read(path, max_bytes=max_bytes, tail=True)

    def read_range(self, path: str, offset: int, max_bytes: int | None = None, timeout: float = 30.0) -> str:
        return self._read(path, offset, max_bytes)

    def follow(self, path: str) -> RemoteProcess:
        return self.t.stream_ps(winscripts.follow_log(path))

    def layout(self, bin_dir: str, links: Sequence[Link]) -> None:
        """Hard links into the store (``winscripts.layout``); no execute bit to set there."""
        res = self.t.run_ps(winscripts.layout(bin_dir, [(ln.name, ln.blob) for ln in links]), timeout=60)
        if not res.ok:
            raise TransportError(
                f"could not lay out {bin_dir} (exit {res.exit_code}): {(res.stderr or res.stdout).strip()[:200]}",
                remedy="check the device's disk space and the store's permissions",
            )

    @classmethod
    def script_argv(cls, script: str) -> list[str]:
        return encode_powershell(script)

    @classmethod
    def system_log_argv(cls, lines: int, follow: bool) -> list[str]:
        """The System event log (``winscripts.event_log``)."""
        return encode_powershell(winscripts.event_log(lines, follow))

    def write_files(self, workdir: str, files: dict[str, str]) -> None:
        raise TransportError(
            "writing generated files into a Windows run directory is not supported",
            remedy="run this strategy on a Linux device",
        )


_HOSTS: dict[Shell, type[Host]] = {
    Shell.POSIX: Host,
    Shell.TOYBOX: AndroidHost,
    Shell.POWERSHELL: WindowsHost,
}


def host_class(shell: Shell) -> type[Host]:
    """The host kind for a shell family (before a connection is open: a command to build)."""
    return _HOSTS.get(shell, Host)


def host_named(shell: str) -> type[Host]:
    """The host kind for a device's registered shell (the inventory's ``posix``, ``toybox``,
    ``powershell``), before a connection is open: what a plan may assume of the device."""
    try:
        return host_class(Shell(shell))
    except ValueError:
        return Host


def host_for_family(family: str) -> type[Host]:
    """The host kind for an OS family's name (``Host.family``: linux, android, windows), so a probe
    collector names the family its script is written for and never a shell."""
    for host in _HOSTS.values():
        if host.family == family:
            return host
    raise ValueError(f"no host kind for OS family {family!r}")


def host_of(t: Transport) -> Host:
    """The host behind ``t``, chosen once per connection (kept in the transport's memo)."""
    host = t.memo.get("host")
    if not isinstance(host, Host) or host.t is not t:
        host = t.memo["host"] = host_class(t.shell)(t)
    return host
