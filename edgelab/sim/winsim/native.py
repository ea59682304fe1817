"""Windows native programs of the persona (taskkill, nvidia-smi, ...) and Windows command lines.

``split_command_line`` is CommandLineToArgvW (how a Windows program reads its command line:
``Start-Process -ArgumentList`` hands one string); ``taskkill`` kills process trees by parent
process id, with the messages and exit codes of taskkill.exe; ``launch_argv`` starts a Windows
x64 executable through wine, in the persona's own prefix, and refuses what Windows would refuse.
"""

from __future__ import annotations

import os
import re
import signal
import time

from . import fs
from .objects import proc_alive, proc_table, same_persona


def split_command_line(line: str) -> list[str]:
    """CommandLineToArgvW rules: whitespace separates; "..." groups; 2n backslashes + quote -> n
    backslashes and a quote delimiter; 2n+1 backslashes + quote -> n backslashes and a literal quote;
    "" inside a quoted run is a literal quote."""
    args: list[str] = []
    i, n = 0, len(line)
    while i < n:
        while i < n and line[i] in " \t":
            i += 1
        if i >= n:
            break
        buf: list[str] = []
        quoted = False
        while i < n and (quoted or line[i] not in " \t"):
            ch = line[i]
            if ch == "\\":
                j = i
                while j < n and line[j] == "\\":
                    j += 1
                count = j - i
                if j < n and line[j] == '"':
                    buf.append("\\" * (count // 2))
                    if count % 2:
                        buf.append('"')
                        i = j + 1
                    else:
                        i = j
                    continue
                buf.append("\\" * count)
                i = j
                continue
            if ch == '"':
                if quoted and i + 1 < n and line[i + 1] == '"':
                    buf.append('"')
                    i += 2
                    continue
                quoted = not quoted
                i += 1
                continue
            buf.append(ch)
            i += 1
        args.append("".join(buf))
    return args


def children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for p in proc_table():
        kids.setdefault(p["ParentProcessId"], []).append(p["ProcessId"])
    return kids


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants, parents first."""
    kids = children_map()
    out, todo = [], [pid]
    while todo:
        cur = todo.pop(0)
        out.append(cur)
        todo.extend(kids.get(cur, []))
    return out


def taskkill(args: list[str], out, err) -> int:
    """taskkill [/T] [/F] /PID n [/PID m ...] | /IM name."""
    opts = [a.upper() for a in args]
    pids: list[int] = []
    i = 0
    while i < len(args):
        a = opts[i]
        if a in ("/PID", "-PID") and i + 1 < len(args):
            try:
                pids.append(int(args[i + 1]))
            except ValueError:
                err.write(
                    "ERROR: Invalid syntax. Value expected for '/PID'.\nType \"TASKKILL /?\" for usage.\n"
                )
                return 1
            i += 2
            continue
        if a not in ("/T", "/F", "-T", "-F"):
            err.write(f"ERROR: Invalid argument/option - '{args[i]}'.\nType \"TASKKILL /?\" for usage.\n")
            return 1
        i += 1
    if not pids:
        err.write(
            "ERROR: Invalid syntax. Neither /FI nor /PID nor /IM were specified.\n"
            'Type "TASKKILL /?" for usage.\n'
        )
        return 1
    force, whole = "/F" in opts or "-F" in opts, "/T" in opts or "-T" in opts
    rc = 0
    table = {p["ProcessId"]: p for p in proc_table()}
    for pid in pids:
        if pid not in table:
            err.write(f'ERROR: The process "{pid}" not found.\n')
            rc = 128
            continue
        victims = tree(pid) if whole else [pid]
        if not force:
            err.write(
                f"ERROR: The process with PID {pid} could not be terminated.\n"
                "Reason: This process can only be terminated forcefully (with /F option).\n"
            )
            rc = 1
            continue
        for v in reversed(victims):  # children first, as taskkill /T reports them
            if not same_persona(v):
                err.write(
                    f"ERROR: The process with PID {v} could not be terminated.\nReason: Access is denied.\n"
                )
                rc = 1
                continue
            try:
                os.kill(v, signal.SIGKILL)
            except ProcessLookupError:
                continue
            except PermissionError:
                err.write(
                    f"ERROR: The process with PID {v} could not be terminated.\nReason: Access is denied.\n"
                )
                rc = 1
                continue
            parent = table.get(v, {}).get("ParentProcessId", 0)
            if v == pid and not whole:
                out.write(f"SUCCESS: The process with PID {v} has been terminated.\n")
            else:
                out.write(
                    f"SUCCESS: The process with PID {v} (child process of PID {parent}) has been terminated.\n"
                )
        end = time.monotonic() + 2.0
        while any(proc_alive(v) for v in victims) and time.monotonic() < end:
            time.sleep(0.02)
    return rc


NVIDIA_FIELDS = {
    "index": "index",
    "name": "name",
    "driver_version": "driver_version",
    "pci.bus_id": "pci.bus_id",
    "utilization.gpu": "utilization.gpu",
    "utilization.memory": "utilization.memory",
    "memory.total": "memory.total",
    "memory.used": "memory.used",
    "memory.free": "memory.free",
    "temperature.gpu": "temperature.gpu",
    "power.draw": "power.draw",
    "power.limit": "power.limit",
    "clocks.sm": "clocks.sm",
    "clocks.mem": "clocks.mem",
    "clocks.gr": "clocks.gr",
    "pstate": "pstate",
    "fan.speed": "fan.speed",
    "clocks_throttle_reasons.active": "clocks_throttle_reasons.active",
    "compute_cap": "compute_cap",
}
UNITS = {
    "utilization.gpu": " %",
    "utilization.memory": " %",
    "memory.total": " MiB",
    "memory.used": " MiB",
    "memory.free": " MiB",
    "power.draw": " W",
    "power.limit": " W",
    "clocks.sm": " MHz",
    "clocks.mem": " MHz",
    "clocks.gr": " MHz",
    "fan.speed": " %",
}


def nvidia_query(gpus: list[dict], args: list[str], out, err) -> int:
    """``nvidia-smi --query-gpu=a,b --format=csv[,noheader][,nounits]`` from the persona's GPU records."""
    query = fmt = None
    for a in args:
        if a.startswith("--query-gpu="):
            query = a.split("=", 1)[1].split(",")
        elif a.startswith("--format="):
            fmt = a.split("=", 1)[1].split(",")
        elif a in ("-l", "--loop", "-lms") or a.startswith("--loop"):
            err.write("nvidia-smi: this virtual device answers one sample per call (no --loop)\n")
            return 2
    if query is None or fmt is None or "csv" not in fmt:
        err.write('Option "--query-gpu" requires "--format=csv".\n')
        return 2
    for q in query:
        if q not in NVIDIA_FIELDS:
            err.write(f'Field "{q}" is not a valid field to query.\n')
            return 2
    if "noheader" not in fmt:
        out.write(
            ", ".join(
                q + ("" if "nounits" in fmt or q not in UNITS else f" [{UNITS[q].strip()}]") for q in query
            )
            + "\n"
        )
    for g in gpus:
        vals = []
        for q in query:
            v = g.get(q)
            if v is None:
                vals.append("[N/A]")
            else:
                vals.append(f"{v}{'' if 'nounits' in fmt else UNITS.get(q, '')}")
        out.write(", ".join(vals) + "\n")
    return 0


# ------------------------------------------------------------------ Windows executables (wine)

WINE = "/usr/lib/wine/wine64"  # Debian's wine64 (not on PATH)
WINESERVER = "/usr/lib/wine/wineserver64"
PE_MACHINES = {0x8664: "x64", 0xAA64: "arm64", 0x14C: "x86", 0x1C4: "arm"}
ERROR_BAD_EXE_FORMAT = 193  # "%1 is not a valid Win32 application."


class NotRunnable(Exception):
    """A file this virtual Windows device cannot start, with the Win32 error a real one gives."""

    def __init__(self, message: str, code: int = ERROR_BAD_EXE_FORMAT):
        super().__init__(message)
        self.code = code


def pe_machine(path: str) -> str | None:
    """The machine of a PE image (``x64``, ``arm64``, ...), or None when ``path`` is not one."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:2] != b"MZ":
                return None
            f.seek(int.from_bytes(head[0x3C:0x40], "little"))
            sig = f.read(6)
    except OSError:
        return None
    if sig[:4] != b"PE\0\0":
        return None
    machine = int.from_bytes(sig[4:6], "little")
    return PE_MACHINES.get(machine, f"0x{machine:04x}")


def _on_drive(path: str) -> bool:
    return bool(re.match(r"^/[A-Za-z]:(/|$)", path))


def _wine_env(prefix: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(WINEPREFIX=prefix, WINEDEBUG="-all", WINEDLLOVERRIDES="mscoree,mshtml=")
    return env


def _locked(path: str):
    import fcntl

    fh = open(path, "a+")
    fcntl.flock(fh, fcntl.LOCK_EX)
    return fh


def _wineboot(prefix: str) -> None:
    """A new prefix (~10 s), then wait for its wineserver to leave: nothing outlives the set-up."""
    import subprocess

    os.makedirs(prefix, exist_ok=True)
    env = _wine_env(prefix)
    subprocess.run([WINE, "wineboot", "--init"], env=env, capture_output=True, timeout=300)
    subprocess.run([WINESERVER, "-w"], env=env, capture_output=True, timeout=120)
    if not os.path.isfile(os.path.join(prefix, "system.reg")):
        raise NotRunnable(f"wine could not create its prefix {prefix}", code=1)


def _link_drive(drive_c: str, drive: str) -> None:
    """Show the persona's drive C inside the prefix's: each top-level folder wine lacks, each
    profile under ``Users`` and each folder under ``ProgramData``, linked (new ones on every start)."""

    def have(folder: str) -> set[str]:
        try:
            return {n.lower() for n in os.listdir(folder)}
        except OSError:
            return set()

    for sub in ("", "Users", "ProgramData"):
        src = os.path.join(drive, sub) if sub else drive
        if not os.path.isdir(src):
            continue
        dst = drive_c
        if sub:
            match = [n for n in os.listdir(drive_c) if n.lower() == sub.lower()]
            if not match:
                continue
            dst = os.path.join(drive_c, match[0])
        present = have(dst)
        for name in os.listdir(src):
            if name.lower() in present or (not sub and name.lower() in ("users", "programdata")):
                continue
            try:
                os.symlink(os.path.join(src, name), os.path.join(dst, name))
            except FileExistsError:
                continue


def ensure_prefix(prefix: str, template: str, drive: str = "/C:") -> str:
    """The persona's own wine prefix: the shared template's registry (copied) and system folders
    (linked: its C:\\windows is ~700 MB, made once per lab host), with the persona's drive C shown
    in it (``C:\\Users\\edgelab``, ``C:\\ProgramData\\edgelab`` link to the drive), so a path the
    device's store hands a program names the same file under wine."""
    import shutil

    if not os.path.isfile(os.path.join(prefix, "system.reg")):
        os.makedirs(os.path.dirname(template), exist_ok=True)
        with _locked(template + ".lock"):
            if not os.path.isfile(os.path.join(template, "system.reg")):
                shutil.rmtree(template, ignore_errors=True)
                _wineboot(template)
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
        with _locked(prefix + ".lock"):
            if not os.path.isfile(os.path.join(prefix, "system.reg")):
                tmp = prefix + ".partial"
                shutil.rmtree(tmp, ignore_errors=True)
                os.makedirs(os.path.join(tmp, "dosdevices"))
                os.makedirs(os.path.join(tmp, "drive_c"))
                for name in os.listdir(template):
                    if name.endswith(".reg") or name == ".update-timestamp":
                        shutil.copy2(os.path.join(template, name), os.path.join(tmp, name))
                os.symlink("../drive_c", os.path.join(tmp, "dosdevices", "c:"))
                src_c = os.path.join(template, "drive_c")
                for name in os.listdir(src_c):
                    src, dst = os.path.join(src_c, name), os.path.join(tmp, "drive_c", name)
                    if name.lower() in ("users", "programdata"):
                        shutil.copytree(src, dst, symlinks=True)  # small, and written per device
                    else:
                        os.symlink(src, dst)  # C:\windows, C:\Program Files: shared, only read
                os.replace(tmp, prefix)
    _link_drive(os.path.join(prefix, "drive_c"), drive)
    return prefix


def launch_argv(exe: str, args: list[str]) -> tuple[list[str], dict[str, str] | None]:
    """How this virtual Windows device starts ``exe``: a Windows x64 executable through wine in the
    persona's own prefix (``EDGELAB_WINEPREFIX``); a file on drive C that is no Windows x64 or
    x86 image (an ELF, an ARM64 .exe) fails as on Windows (error 193); the lab host's programs
    (python, the shims) run as they are. Returns the argv and the environment (None: unchanged)."""
    machine = pe_machine(exe)
    if machine is None:
        if _on_drive(exe):
            raise NotRunnable(f"{fs.from_host(exe)} is not a valid Win32 application.")
        return [exe, *args], None
    if machine not in ("x64", "x86"):
        raise NotRunnable(
            f"{fs.from_host(exe)} is a Windows {machine} image; this virtual device (wine on an x86-64 "
            "lab host) runs x64 and x86 images only"
        )
    prefix, template = os.environ.get("EDGELAB_WINEPREFIX"), os.environ.get("EDGELAB_WINE_TEMPLATE")
    if not (os.access(WINE, os.X_OK) and os.access(WINESERVER, os.X_OK)):
        raise NotRunnable(
            f"this virtual device runs Windows executables through wine, and {WINE} is not installed "
            "(apt-get install -y wine64)",
            code=2,
        )
    if not prefix or not template:
        raise NotRunnable("this persona has no wine prefix (EDGELAB_WINEPREFIX is not set)", code=2)
    ensure_prefix(prefix, template)
    # by its Windows path (the prefix's C: holds the drive's profiles), so the program's argv[0]
    # and module path read C:\\... as on the device
    return [WINE, fs.from_host(exe) if _on_drive(exe) else exe, *args], _wine_env(prefix)
