"""Windows native programs of the persona (taskkill, nvidia-smi, ...) and Windows command lines.

``split_command_line`` is CommandLineToArgvW (how a Windows program reads its command line:
``Start-Process -ArgumentList`` hands one string); ``taskkill`` kills process trees by parent
process id, with the messages and exit codes of taskkill.exe.
"""

from __future__ import annotations

import os
import signal
import time

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
