"""The cmdlets, .NET members and native programs of the PowerShell subset, with Microsoft's semantics.

``CMDLETS`` maps a lower-case name (aliases included) to ``fn(interp, named, positional, input)``;
``NATIVE_BUILTINS`` are the Windows programs the persona emulates (taskkill.exe, nvidia-smi.exe, ...);
anything else found on PATH runs for real. ``COVERED`` is what the drift test checks edgelab's
list (``edgelab.transport.winps``) against.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from . import fs, native
from . import psparse as P
from .objects import (
    DateTime,
    FileStream,
    HashAlgorithm,
    Item,
    Process,
    PSObj,
    proc_alive,
    proc_table,
    same_persona,
)
from .values import (
    PSError,
    TypeRef,
    collapse,
    format_objects,
    get_member,
    to_jsonable,
    to_num,
    to_str,
    truthy,
    unroll,
)

if TYPE_CHECKING:  # annotations only: the interpreter imports this module (its cmdlet table)
    from .pseval import Interp


def _path_arg(named: dict, pos: list, *names: str) -> list[str]:
    for n in names:
        if n in named:
            return [to_str(x) for x in unroll(named[n])]
    return [to_str(x) for x in unroll(pos[0])] if pos else []


def _not_found(cmd: str, path: str, class_: str) -> PSError:
    return PSError(
        f"Cannot find path '{path}' because it does not exist.",
        "ObjectNotFound",
        f"PathNotFound,Microsoft.PowerShell.Commands.{class_}",
        path,
        cmd,
    )


def _data(interp: Interp, name: str) -> str | None:
    if not interp.persona_dir:
        return None
    path = os.path.join(interp.persona_dir, "data", name)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()


# ------------------------------------------------------------------ file system


def new_item(interp, named, pos, inp):
    paths = _path_arg(named, pos, "path")
    kind = to_str(named.get("itemtype", "File")).lower()
    out = []
    for p in paths:
        if "name" in named:
            p = fs.join(p, to_str(named["name"]))
        host = interp.host(p)
        if kind == "directory":
            if os.path.isdir(host):
                if not named.get("force"):
                    raise PSError(
                        f"An item with the specified name {fs.from_host(host)} already exists.",
                        "ResourceExists",
                        "DirectoryExist,Microsoft.PowerShell.Commands.NewItemCommand",
                        fs.from_host(host),
                        "New-Item",
                    )
            elif os.path.exists(host):
                raise PSError(
                    f"An item with the specified name {fs.from_host(host)} already exists.",
                    "ResourceExists",
                    "DirectoryExist,Microsoft.PowerShell.Commands.NewItemCommand",
                    p,
                    "New-Item",
                )
            else:
                os.makedirs(host, exist_ok=True)
        elif kind in ("hardlink", "symboliclink"):
            target = named.get("target", named.get("value"))
            thost = interp.host(target) if target is not None else ""
            if not target or not os.path.exists(thost):
                raise PSError(
                    f"Cannot find path '{to_str(target)}' because it does not exist.",
                    "ObjectNotFound",
                    "PathNotFound,Microsoft.PowerShell.Commands.NewItemCommand",
                    to_str(target),
                    "New-Item",
                )
            if os.path.lexists(host):
                if not named.get("force"):
                    raise PSError(
                        f"An item with the specified name {fs.from_host(host)} already exists.",
                        "ResourceExists",
                        "NewItemIOError,Microsoft.PowerShell.Commands.NewItemCommand",
                        p,
                        "New-Item",
                    )
                os.unlink(host)
            if kind == "hardlink":
                if os.path.isdir(thost):
                    raise PSError(
                        "This operation is not supported for a directory: use a junction or a symbolic link.",
                        "InvalidArgument",
                        "NewItemInvalidItemType",
                        p,
                        "New-Item",
                    )
                os.link(thost, host)
            else:
                os.symlink(thost, host)
        elif kind == "file":
            if os.path.exists(host) and not named.get("force"):
                raise PSError(
                    f"The file '{fs.from_host(host)}' already exists.",
                    "WriteError",
                    "NewItemIOError,Microsoft.PowerShell.Commands.NewItemCommand",
                    p,
                    "New-Item",
                )
            parent = os.path.dirname(host)
            if not os.path.isdir(parent):
                raise PSError(
                    f"Could not find a part of the path '{fs.from_host(host)}'.",
                    "WriteError",
                    "NewItemIOError,Microsoft.PowerShell.Commands.NewItemCommand",
                    p,
                    "New-Item",
                )
            with open(host, "w", encoding="utf-8") as f:
                f.write(to_str(named.get("value", "")))
        else:
            raise PSError(
                'Cannot process argument because the value of argument "ItemType" is not valid.',
                "InvalidArgument",
                "NewItemInvalidItemType",
                kind,
                "New-Item",
            )
        out.append(Item(host))
    return out


def test_path(interp, named, pos, inp):
    paths = _path_arg(named, pos, "literalpath", "path")
    if not paths:
        raise PSError(
            "Cannot bind argument to parameter 'Path' because it is null.",
            "InvalidData",
            "ParameterArgumentValidationErrorNullNotAllowed,Microsoft.PowerShell.Commands.TestPathCommand",
            "",
            "Test-Path",
        )
    kind = to_str(named.get("pathtype", "Any")).lower()
    out = []
    for p in paths:
        host = interp.host(p)
        ok = (
            os.path.isfile(host)
            if kind == "leaf"
            else os.path.isdir(host)
            if kind == "container"
            else os.path.exists(host)
        )
        out.append(ok)
    return out


def get_item(interp, named, pos, inp):
    out = []
    for p in _path_arg(named, pos, "literalpath", "path"):
        host = interp.host(p)
        if not os.path.exists(host):
            raise _not_found("Get-Item", fs.from_host(host), "GetItemCommand")
        out.append(Item(host))
    return out


def get_child_item(interp, named, pos, inp):
    paths = _path_arg(named, pos, "literalpath", "path") or [interp.cwd]
    out = []
    for p in paths:
        host = interp.host(p)
        if not os.path.exists(host):
            raise _not_found("Get-ChildItem", fs.from_host(host), "GetChildItemCommand")
        if os.path.isfile(host):
            out.append(Item(host))
            continue
        for name in sorted(os.listdir(host), key=str.lower):
            item = Item(os.path.join(host, name))
            if named.get("file") and item.is_dir or named.get("directory") and not item.is_dir:
                continue
            out.append(item)
    return out


def move_item(interp, named, pos, inp):
    srcs = _path_arg(named, pos, "literalpath", "path")
    dest = named.get("destination", pos[1] if len(pos) > 1 else None)
    if dest is None:
        raise PSError(
            "Cannot bind argument to parameter 'Destination'.",
            "InvalidArgument",
            "MissingArgument,Microsoft.PowerShell.Commands.MoveItemCommand",
            "",
            "Move-Item",
        )
    dhost = interp.host(dest)
    for s in srcs:
        shost = interp.host(s)
        if not os.path.exists(shost):
            raise _not_found("Move-Item", fs.from_host(shost), "MoveItemCommand")
        target = os.path.join(dhost, os.path.basename(shost)) if os.path.isdir(dhost) else dhost
        if os.path.exists(target) and os.path.isfile(target):
            if not named.get("force"):
                raise PSError(
                    "Cannot create a file when that file already exists.",
                    "WriteError",
                    "MoveFileInfoItemIOError,Microsoft.PowerShell.Commands.MoveItemCommand",
                    fs.from_host(shost),
                    "Move-Item",
                )
        os.replace(shost, target)
    return [Item(dhost)] if named.get("passthru") else []


def remove_item(interp, named, pos, inp):
    for p in _path_arg(named, pos, "literalpath", "path"):
        host = interp.host(p)
        if not os.path.lexists(host):
            raise _not_found("Remove-Item", fs.from_host(host), "RemoveItemCommand")
        if os.path.isdir(host) and not os.path.islink(host):
            if os.listdir(host) and not named.get("recurse"):
                raise PSError(
                    f"The item at {fs.from_host(host)} has children and the Recurse parameter was not "
                    "specified.",
                    "WriteError",
                    "DirectoryNotEmpty,Microsoft.PowerShell.Commands.RemoveItemCommand",
                    fs.from_host(host),
                    "Remove-Item",
                )
            shutil.rmtree(host)
        else:
            os.unlink(host)
    return []


def get_file_hash(interp, named, pos, inp):
    algo = to_str(named.get("algorithm", "SHA256")).upper()
    if algo not in ("SHA1", "SHA256", "SHA384", "SHA512", "MD5"):
        raise PSError(
            f"Cannot validate argument on parameter 'Algorithm'. The argument \"{algo}\" does not belong "
            'to the set "SHA1,SHA256,SHA384,SHA512,MD5" specified by the ValidateSet attribute.',
            "InvalidData",
            "ParameterArgumentValidationError,Microsoft.PowerShell.Commands.GetFileHashCommand",
            algo,
            "Get-FileHash",
        )
    out = []
    for p in _path_arg(named, pos, "literalpath", "path"):
        host = interp.host(p)
        if not os.path.isfile(host):
            raise _not_found(
                "Get-FileHash", fs.from_host(host) if fs.is_windows_path(p) else p, "GetFileHashCommand"
            )
        h = hashlib.new(algo.lower())
        with open(host, "rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
        out.append(
            PSObj(
                {
                    "Algorithm": algo,
                    "Hash": h.hexdigest().upper(),
                    "Path": fs.from_host(host) if fs.is_windows_path(p) else p,
                },
                "Microsoft.Powershell.Utility.FileHash",
            )
        )
    return out


def _read_text(host: str) -> str:
    raw = open(host, "rb").read()
    if raw.startswith(b"\xff\xfe"):
        return raw[2:].decode("utf-16-le", "replace")
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    return raw.decode("utf-8", "replace")


def _follow(host: str) -> None:
    """Get-Content -Wait: the lines so far, then each appended line (checked every 0.2 s) until killed."""
    with open(host, "rb") as f:
        pending = b""
        while True:
            chunk = f.read(1 << 16)
            if not chunk:
                time.sleep(0.2)
                continue
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                sys.stdout.write(line.rstrip(b"\r").decode("utf-8", "replace") + "\n")
            sys.stdout.flush()


def get_content(interp, named, pos, inp):
    out = []
    if named.get("wait"):
        for p in _path_arg(named, pos, "literalpath", "path"):
            host = interp.host(p)
            if not os.path.isfile(host):
                raise _not_found("Get-Content", fs.from_host(host), "GetContentCommand")
            _follow(host)
    for p in _path_arg(named, pos, "literalpath", "path"):
        host = interp.host(p)
        if not os.path.isfile(host):
            raise _not_found("Get-Content", fs.from_host(host), "GetContentCommand")
        text = _read_text(host)
        if named.get("raw"):
            out.append(text)
            continue
        lines = text.replace("\r\n", "\n").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if "tail" in named:
            n = int(to_num(named["tail"]))
            lines = lines[-n:] if n else []
        if "totalcount" in named:
            lines = lines[: int(to_num(named["totalcount"]))]
        out.extend(lines)
    return out


def set_content(interp, named, pos, inp):
    value = named.get("value", pos[1] if len(pos) > 1 else None)
    values = unroll(value) if value is not None else list(inp)
    sep = "" if named.get("nonewline") else "\r\n"
    text = sep.join(to_str(v) for v in values) + ("" if named.get("nonewline") else "\r\n")
    for p in _path_arg(named, pos, "literalpath", "path"):
        host = interp.host(p)
        if not os.path.isdir(os.path.dirname(host)):
            raise PSError(
                f"Could not find a part of the path '{fs.from_host(host)}'.",
                "ObjectNotFound",
                "GetContentWriterDirectoryNotFoundError,Microsoft.PowerShell.Commands.SetContentCommand",
                p,
                "Set-Content",
            )
        enc = to_str(named.get("encoding", "ascii")).lower()
        data = (
            text.encode("utf-16-le")
            if enc in ("unicode",)
            else text.encode("utf-8" if enc.startswith("utf8") else "ascii", "replace")
        )
        with open(host, "wb") as f:
            f.write(data)
    return []


def join_path(interp, named, pos, inp):
    base = named.get("path", pos[0] if pos else None)
    child = named.get("childpath", pos[1] if len(pos) > 1 else None)
    if base is None or child is None:
        raise PSError(
            "Cannot bind argument to parameter 'Path' because it is null.",
            "InvalidData",
            "ParameterArgumentValidationErrorNullNotAllowed,Microsoft.PowerShell.Commands.JoinPathCommand",
            "",
            "Join-Path",
        )
    return [fs.join(to_str(b), to_str(child)) for b in unroll(base)]


# ------------------------------------------------------------------ processes


def start_process(interp, named, pos, inp):
    """Start-Process: one command line from -ArgumentList (an array is joined with spaces, as
    Windows PowerShell does), redirected output, a new process group; -PassThru gives the Process."""
    file = to_str(named.get("filepath", pos[0] if pos else ""))
    if not file:
        raise PSError(
            "Cannot bind argument to parameter 'FilePath' because it is an empty string.",
            "InvalidData",
            "ParameterArgumentValidationErrorEmptyStringNotAllowed",
            "",
            "Start-Process",
        )
    arglist = named.get("argumentlist", pos[1] if len(pos) > 1 else None)
    line = " ".join(to_str(a) for a in unroll(arglist)) if arglist is not None else ""
    exe = resolve_native(interp, file)
    if exe is None:
        raise PSError(
            "This command cannot be run due to the error: The system cannot find the file specified.",
            "InvalidOperation",
            "InvalidOperationException,Microsoft.PowerShell.Commands.StartProcessCommand",
            file,
            "Start-Process",
        )
    if named.get("nonewwindow") and "windowstyle" in named:
        raise PSError(
            'Parameters "-NoNewWindow" and "-WindowStyle" cannot be specified at the same time.',
            "InvalidOperation",
            "InvalidOperationException,Microsoft.PowerShell.Commands.StartProcessCommand",
            "",
            "Start-Process",
        )
    if exe in NATIVE_BUILTINS:
        raise PSError(
            f"This virtual device runs {file} only in the session, not with Start-Process.",
            "InvalidOperation",
            "InvalidOperationException,Microsoft.PowerShell.Commands.StartProcessCommand",
            file,
            "Start-Process",
        )
    try:
        argv, env = native.launch_argv(exe, native.split_command_line(line))
    except native.NotRunnable as e:
        raise PSError(
            f"This command cannot be run due to the error: {e}",
            "InvalidOperation",
            "InvalidOperationException,Microsoft.PowerShell.Commands.StartProcessCommand",
            file,
            "Start-Process",
        ) from None
    wd = interp.host(named["workingdirectory"]) if "workingdirectory" in named else interp.host(interp.cwd)
    if not os.path.isdir(wd):
        raise PSError(
            f'This command cannot be run because the working directory "{fs.from_host(wd)}" does not exist.',
            "InvalidOperation",
            "InvalidOperationException,Microsoft.PowerShell.Commands.StartProcessCommand",
            "",
            "Start-Process",
        )
    files = []

    def redirect(key: str, mode: str):
        if key not in named:
            return subprocess.DEVNULL
        host = interp.host(named[key])
        f = open(host, mode)
        files.append(f)
        return f

    if (
        "redirectstandardoutput" in named
        and "redirectstandarderror" in named
        and interp.host(named["redirectstandardoutput"]) == interp.host(named["redirectstandarderror"])
    ):
        raise PSError(
            'This command cannot be run because "RedirectStandardOutput" and "RedirectStandardError" '
            "are same. Give different inputs and Run your command again.",
            "InvalidOperation",
            "InvalidOperationException,Microsoft.PowerShell.Commands.StartProcessCommand",
            "",
            "Start-Process",
        )
    try:
        stdin = redirect("redirectstandardinput", "rb")
        stdout = redirect("redirectstandardoutput", "wb")
        stderr = redirect("redirectstandarderror", "wb")
        # The session's environment with the $env: assignments made (the persona's Windows variables
        # stay in the shim: the programs it starts are the lab host's, which would misread C:\ paths).
        proc = subprocess.Popen(
            argv,
            cwd=wd,
            env=env,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as e:
        raise PSError(
            f"This command cannot be run due to the error: {e.strerror}.",
            "InvalidOperation",
            "InvalidOperationException,Microsoft.PowerShell.Commands.StartProcessCommand",
            file,
            "Start-Process",
        ) from None
    finally:
        for f in files:
            f.close()
    if named.get("wait"):
        proc.wait()
    return (
        [Process(proc.pid, os.path.splitext(os.path.basename(file))[0], proc)]
        if named.get("passthru")
        else []
    )


JOB_VAR = "EDGELAB_WIN_JOB"  # the SSH session's job object: see shell.end_job


def invoke_cim_method(interp, named, pos, inp):
    """Invoke-CimMethod Win32_Process Create: a process made by the WMI service, so outside the SSH
    session's job object (OpenSSH for Windows kills that job when the session's shell exits)."""
    cls = to_str(named.get("classname", pos[0] if pos else "")).lower()
    method = to_str(named.get("methodname", pos[1] if len(pos) > 1 else "")).lower()
    if (cls, method) != ("win32_process", "create"):
        raise PSError(
            f"Invalid method {method or '?'} on class {cls or '?'}",
            "MetadataError",
            "HRESULT 0x80041055,Microsoft.Management.Infrastructure.CimCmdlets.InvokeCimMethodCommand",
            cls,
            "Invoke-CimMethod",
        )
    arguments = named.get("arguments")
    props = arguments.props if isinstance(arguments, PSObj) else {}
    line = to_str(next((v for k, v in props.items() if k.lower() == "commandline"), ""))
    cwd = next((v for k, v in props.items() if k.lower() == "currentdirectory"), None)
    words = native.split_command_line(line)
    exe = resolve_native(interp, words[0]) if words else None
    wd = interp.host(cwd) if cwd is not None else "/"
    if exe is None or exe in NATIVE_BUILTINS or not os.path.isdir(wd):
        return [
            PSObj(
                {"ProcessId": None, "ReturnValue": 9}, "Microsoft.Management.Infrastructure.CimMethodResult"
            )
        ]
    try:
        argv, wine_env = native.launch_argv(exe, words[1:])
    except native.NotRunnable:
        return [
            PSObj(
                {"ProcessId": None, "ReturnValue": 9}, "Microsoft.Management.Infrastructure.CimMethodResult"
            )
        ]
    env = {k: v for k, v in (wine_env or os.environ).items() if k != JOB_VAR}
    proc = subprocess.Popen(
        argv,
        cwd=wd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    return [
        PSObj(
            {"ProcessId": proc.pid, "ReturnValue": 0}, "Microsoft.Management.Infrastructure.CimMethodResult"
        )
    ]


def _ids(named, pos) -> list[int]:
    raw = named.get("id", pos[0] if pos else None)
    return [int(to_num(x)) for x in unroll(raw)]


def get_process(interp, named, pos, inp):
    out = []
    if "id" in named:
        for pid in _ids(named, []):
            if proc_alive(pid):
                out.append(Process(pid))
            else:  # non-terminating: the other ids still come out
                interp.error(
                    PSError(
                        f"Cannot find a process with the process identifier {pid}.",
                        "ObjectNotFound",
                        "NoProcessFoundForGivenId,Microsoft.PowerShell.Commands.GetProcessCommand",
                        str(pid),
                        "Get-Process",
                    )
                )
        return out
    names = (
        [to_str(x).lower() for x in unroll(named.get("name", pos[0] if pos else None))]
        if ("name" in named or pos)
        else None
    )
    for p in proc_table():
        if names is None or os.path.splitext(p["Name"])[0].lower() in names:
            out.append(Process(p["ProcessId"]))
    if names and not out:
        raise PSError(
            f'Cannot find a process with the name "{names[0]}". Verify the process name and call the '
            "cmdlet again.",
            "ObjectNotFound",
            "NoProcessFoundForGivenName,Microsoft.PowerShell.Commands.GetProcessCommand",
            names[0],
            "Get-Process",
        )
    return out


def stop_process(interp, named, pos, inp):
    import signal

    pids = _ids(named, pos) if ("id" in named or pos) else [get_member(x, "Id") for x in inp]
    for pid in pids:
        if not proc_alive(int(pid)):
            raise PSError(
                f"Cannot find a process with the process identifier {pid}.",
                "ObjectNotFound",
                "NoProcessFoundForGivenId,Microsoft.PowerShell.Commands.StopProcessCommand",
                str(pid),
                "Stop-Process",
            )
        try:
            if not same_persona(int(pid)):
                raise PermissionError
            os.kill(int(pid), signal.SIGKILL)  # TerminateProcess: no grace, the process alone (not its tree)
        except PermissionError:
            raise PSError(
                f'Cannot stop process "{pid}" because of the following error: Access is denied',
                "CloseError",
                "CouldNotStopProcess,Microsoft.PowerShell.Commands.StopProcessCommand",
                str(pid),
                "Stop-Process",
            ) from None
        end = time.monotonic() + 2
        while proc_alive(int(pid)) and time.monotonic() < end:
            time.sleep(0.01)
    return []


def start_sleep(interp, named, pos, inp):
    if "milliseconds" in named:
        time.sleep(to_num(named["milliseconds"]) / 1000)
    else:
        time.sleep(to_num(named.get("seconds", pos[0] if pos else 0)))
    return []


# ------------------------------------------------------------------ CIM


def _cpu_percent() -> float:
    def snap():
        with open("/proc/stat") as f:
            vals = [int(x) for x in f.readline().split()[1:]]
        idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
        return sum(vals), idle

    t1, i1 = snap()
    time.sleep(0.1)
    t2, i2 = snap()
    return round(100.0 * (1 - (i2 - i1) / max(1, t2 - t1)), 1)


def _cim_class(interp: Interp, cls: str) -> list[dict] | None:
    low = cls.lower()
    raw = _data(interp, f"cim/{cls}.json")
    if raw is None and interp.persona_dir:
        d = os.path.join(interp.persona_dir, "data", "cim")
        for name in os.listdir(d) if os.path.isdir(d) else []:
            if name.lower() == low + ".json":
                raw = _data(interp, f"cim/{name}")
    if raw is not None:
        objs = json.loads(raw)
        return objs if isinstance(objs, list) else [objs]
    if low == "win32_process":
        return proc_table()
    osd = _cim_class(interp, "Win32_OperatingSystem") if low.startswith("win32_perfformatteddata") else None
    if low == "win32_perfformatteddata_perfos_processor":
        ncpu = int(interp.env.get("NUMBER_OF_PROCESSORS", os.cpu_count() or 1))
        total = _cpu_percent()
        rows = [
            {"Name": str(i), "PercentProcessorTime": int(total), "PercentIdleTime": int(100 - total)}
            for i in range(ncpu)
        ]
        rows.append(
            {
                "Name": "_Total",
                "PercentProcessorTime": int(total),
                "PercentIdleTime": int(100 - total),
                "PercentUserTime": int(total),
                "PercentPrivilegedTime": 0,
                "InterruptsPersec": 0,
            }
        )
        return rows
    if low == "win32_perfformatteddata_perfos_memory" and osd:
        o = osd[0]
        kib = 1024
        used = _persona_rss()  # what the device's own processes hold comes off its free memory
        avail = max(0, int(o.get("FreePhysicalMemory", 0)) * kib - used)
        limit = int(o.get("TotalVirtualMemorySize", 0)) * kib
        committed = min(limit, limit - int(o.get("FreeVirtualMemory", 0)) * kib + used)
        return [
            {
                "Name": None,
                "AvailableBytes": avail,
                "AvailableMBytes": avail >> 20,
                "CommittedBytes": committed,
                "CommitLimit": limit,
                "PercentCommittedBytesInUse": int(100 * committed / limit) if limit else 0,
                "PagesPersec": 0,
                "CacheBytes": 0,
            }
        ]
    return None


def _persona_rss() -> int:
    return sum(p["WorkingSetSize"] for p in proc_table() if same_persona(p["ProcessId"]))


def _wql_filter(rows: list[dict], flt: str) -> list[dict]:
    import re

    conds = [c.strip() for c in re.split(r"\s+AND\s+", flt, flags=re.I) if c.strip()]
    out = rows
    for c in conds:
        m = re.fullmatch(r"(\w+)\s*(=|<>|!=|>|<|LIKE)\s*(?:'((?:[^']|'')*)'|(-?\d+))", c, re.I)
        if not m:
            raise PSError(
                "Invalid query ",
                "InvalidArgument",
                "HRESULT 0x80041017,Microsoft.Management.Infrastructure.CimCmdlets.GetCimInstanceCommand",
                "",
                "Get-CimInstance",
            )
        key, op, sval, nval = m.groups()
        want: Any = int(nval) if nval is not None else sval.replace("''", "'")

        def ok(r, key=key, op=op.upper(), want=want):
            v = next((x for k, x in r.items() if k.lower() == key.lower()), None)
            if op == "LIKE":
                import fnmatch

                return fnmatch.fnmatch(str(v).lower(), str(want).replace("%", "*").lower())
            if isinstance(want, int):
                try:
                    v = int(v)
                except (TypeError, ValueError):
                    return False
            else:
                v, want = str(v).lower(), str(want).lower()
            return {"=": v == want, "<>": v != want, "!=": v != want, ">": v > want, "<": v < want}[op]

        out = [r for r in out if ok(r)]
    return out


def get_cim_instance(interp, named, pos, inp):
    cls = to_str(named.get("classname", named.get("class", pos[0] if pos else "")))
    if not cls:
        raise PSError(
            "Cannot process argument: ClassName is missing.",
            "InvalidArgument",
            "ParameterArgumentValidationError",
            "",
            "Get-CimInstance",
        )
    ns = to_str(named.get("namespace", "root/cimv2")).replace("\\", "/").lower()
    rows = _cim_class(interp, cls) if ns == "root/cimv2" else None
    if rows is None:
        raise PSError(
            "Invalid class ",
            "MetadataError",
            "HRESULT 0x80041010,Microsoft.Management.Infrastructure.CimCmdlets.GetCimInstanceCommand",
            f"{ns}:{cls}",
            "Get-CimInstance",
        )
    if "filter" in named:
        rows = _wql_filter(rows, to_str(named["filter"]))
    if "property" in named:
        props = [to_str(p) for p in unroll(named["property"])]
        rows = [{k: v for k, v in r.items() if any(k.lower() == p.lower() for p in props)} for r in rows]
    return [PSObj(r, f"Microsoft.Management.Infrastructure.CimInstance#root/cimv2/{cls}") for r in rows]


def get_win_event(interp, named, pos, inp):
    """Get-WinEvent -LogName NAME [-MaxEvents N]: the persona's event log (``data/eventlog/NAME.json``, a list
    of records in the order they were written, appended to while the device runs), newest first as Windows
    returns them."""
    log_name = to_str(named.get("logname", pos[0] if pos else ""))
    raw = _data(interp, f"eventlog/{log_name}.json") if log_name and "/" not in log_name else None
    if raw is None:
        raise PSError(
            f'There is not an event log on the localhost computer that matches "{log_name}".',
            "ObjectNotFound",
            "NoMatchingLogsFound,Microsoft.PowerShell.Commands.GetWinEventCommand",
            log_name,
            "Get-WinEvent",
        )
    levels = {1: "Critical", 2: "Error", 3: "Warning", 4: "Information", 5: "Verbose"}
    rows = []
    for number, rec in enumerate(json.loads(raw), 1):
        when = dt.datetime.fromisoformat(rec["TimeCreated"].replace("Z", "+00:00"))
        level = int(rec.get("Level", 4))
        rows.append(
            PSObj(
                {
                    "TimeCreated": DateTime(when if when.tzinfo else when.replace(tzinfo=dt.UTC)),
                    "Id": int(rec["Id"]),
                    "RecordId": int(rec.get("RecordId", number)),
                    "Level": level,
                    "LevelDisplayName": levels.get(level, str(level)),
                    "ProviderName": rec.get("ProviderName", ""),
                    "LogName": log_name,
                    "Message": rec.get("Message", ""),
                },
                "System.Diagnostics.Eventing.Reader.EventLogRecord",
            )
        )
    rows.reverse()
    if "maxevents" in named:
        rows = rows[: int(to_num(named["maxevents"]))]
    if not rows:
        raise PSError(
            "No events were found that match the specified selection criteria.",
            "ObjectNotFound",
            "NoMatchingEventsFound,Microsoft.PowerShell.Commands.GetWinEventCommand",
            None,
            "Get-WinEvent",
        )
    return rows


def get_pnp_device(interp, named, pos, inp):
    cls = to_str(named.get("class", ""))
    raw = _data(interp, f"pnp/{cls}.json") if cls else None
    if raw is None:
        raise PSError(
            "No matching Win32_PnPEntity objects found by CIM query for instances of the "
            "ROOT\\cimv2\\Win32_PnPEntity class on the  CIM server: SELECT * FROM Win32_PnPEntity  WHERE "
            f"((PNPClass LIKE '{cls}')). Verify query parameters and retry.",
            "ObjectNotFound",
            "CmdletizationQuery_NotFound,Get-PnpDevice",
            "Win32_PnPEntity",
            "Get-PnpDevice",
        )
    objs = json.loads(raw)
    return [
        PSObj(o, "Microsoft.Management.Infrastructure.CimInstance#ROOT/cimv2/Win32_PnPEntity")
        for o in (objs if isinstance(objs, list) else [objs])
    ]


# ------------------------------------------------------------------ pipeline utilities


def _invoke_block(interp: Interp, block, item) -> list:
    from .values import LoopControl, Out

    old = interp.vars.get("_")
    interp.vars["_"] = item
    out = Out(False)
    try:
        for stmt in block.body:
            interp._statement(stmt, out)
    except LoopControl:
        pass
    finally:
        interp.vars["_"] = old
    return out.items


def foreach_object(interp, named, pos, inp):
    block = named.get("process", pos[0] if pos else None)
    if isinstance(block, str):  # ForEach-Object PropertyName
        return [get_member(x, block) for x in inp]
    if not isinstance(block, P.Block):
        raise PSError(
            "Cannot bind parameter 'Process'.",
            "InvalidArgument",
            "CannotConvertArgument",
            "",
            "ForEach-Object",
        )
    out = []
    for item in inp:
        out.extend(_invoke_block(interp, block, item))
    return out


def where_object(interp, named, pos, inp):
    block = named.get("filterscript", pos[0] if pos else None)
    if not isinstance(block, P.Block):
        raise PSError(
            "Cannot bind parameter 'FilterScript'.",
            "InvalidArgument",
            "CannotConvertArgument",
            "",
            "Where-Object",
        )
    return [item for item in inp if truthy(collapse(_invoke_block(interp, block, item)))]


def select_object(interp, named, pos, inp):
    items = list(inp)
    if "first" in named:
        items = items[: int(to_num(named["first"]))]
    if "last" in named:
        n = int(to_num(named["last"]))
        items = items[-n:] if n else []
    if "expandproperty" in named:
        name = to_str(named["expandproperty"])
        return [v for x in items for v in unroll(get_member(x, name))]
    props = [to_str(p) for p in unroll(named.get("property", pos[0] if pos else None))]
    props = [q for p in props for q in p.split(",") if q]
    if not props:
        return items
    out = []
    for x in items:
        members = x.members() if hasattr(x, "members") else {}
        row = {}
        for p in props:
            key = next((k for k in members if k.lower() == p.lower()), p)
            row[key] = members.get(key)
        out.append(PSObj(row, "Selected." + getattr(x, "type_name", "System.Object")))
    return out


def convertto_json(interp, named, pos, inp):
    value = named.get("inputobject", None)
    items = unroll(value) if value is not None else list(inp)
    depth = int(to_num(named.get("depth", 2)))
    data = to_jsonable(items[0] if len(items) == 1 else items, depth)
    if named.get("compress"):
        return [json.dumps(data, ensure_ascii=False, separators=(",", ":"))]
    return [json.dumps(data, ensure_ascii=False, indent=4)]


def write_output(interp, named, pos, inp):
    return [v for p in pos for v in unroll(p)] + [v for v in unroll(named.get("inputobject"))]


def out_null(interp, named, pos, inp):
    return []


def out_string(interp, named, pos, inp):
    text = format_objects(list(inp))
    return [text] if not named.get("stream") else text.splitlines()


def format_list(interp, named, pos, inp):
    out = []
    for x in inp:
        m = x.members() if hasattr(x, "members") else {"": x}
        props = [to_str(p) for p in unroll(named.get("property", pos[0] if pos else None))]
        if props and props != ["*"]:
            m = {k: v for k, v in m.items() if any(k.lower() == p.lower() for p in props)}
        width = max((len(k) for k in m), default=0)
        out.append(
            "\n" + "".join(f"{k.ljust(width)} : {'' if v is None else to_str(v)}\n" for k, v in m.items())
        )
    return ["".join(out) + "\n"] if out else []


def new_object(interp, named, pos, inp):
    tname = to_str(named.get("typename", pos[0] if pos else "")).lower().removeprefix("system.")
    args = unroll(named.get("argumentlist", pos[1] if len(pos) > 1 else None))
    if tname == "byte[]":
        return [bytearray(int(to_num(args[0]) if args else 0))]
    if tname in ("security.cryptography.sha256managed", "security.cryptography.sha256cryptoserviceprovider"):
        return [HashAlgorithm("sha256")]
    raise PSError(
        f"Cannot find type [{tname}]: verify that the assembly containing this type is loaded.",
        "InvalidType",
        "TypeNotFound,Microsoft.PowerShell.Commands.NewObjectCommand",
        tname,
        "New-Object",
    )


def write_error(interp, named, pos, inp):
    msg = to_str(named.get("message", pos[0] if pos else ""))
    raise PSError(msg, "NotSpecified", "Microsoft.PowerShell.Commands.WriteErrorException", "", "Write-Error")


def get_command(interp, named, pos, inp):
    out = []
    for name in [to_str(x) for x in unroll(named.get("name", pos[0] if pos else None))]:
        if name.lower() in CMDLETS:
            out.append(
                PSObj(
                    {
                        "CommandType": "Cmdlet",
                        "Name": name,
                        "Version": "3.1.0.0",
                        "Source": "Microsoft.PowerShell.Management",
                    },
                    "System.Management.Automation.CmdletInfo",
                )
            )
            continue
        exe = resolve_native(interp, name)
        if exe is None or (exe in NATIVE_BUILTINS and not _native_present(interp, exe)):
            raise PSError(
                f"The term '{name}' is not recognized as the name of a cmdlet, function, script file, or "
                "operable program. Check the spelling of the name, or if a path was included, verify that "
                "the path is correct and try again.",
                "ObjectNotFound",
                "CommandNotFoundException,Microsoft.PowerShell.Commands.GetCommandCommand",
                name,
                "Get-Command",
            )
        out.append(
            PSObj(
                {
                    "CommandType": "Application",
                    "Name": os.path.basename(name),
                    "Version": "0.0.0.0",
                    "Source": exe,
                },
                "System.Management.Automation.ApplicationInfo",
            )
        )
    return out


def _native_present(interp, exe: str) -> bool:
    """An emulated program exists on this persona only with its data (nvidia-smi without a GPU: absent)."""
    need = {
        "nvidia-smi": "nvidia-smi.txt",
        "nvidia-smi.exe": "nvidia-smi.txt",
        "systeminfo": "systeminfo.txt",
        "systeminfo.exe": "systeminfo.txt",
    }.get(exe)
    return need is None or _data(interp, need) is not None


def get_location(interp, named, pos, inp):
    return [PSObj({"Path": interp.cwd}, "System.Management.Automation.PathInfo")]


CMDLETS = {
    "new-item": new_item,
    "ni": new_item,
    "md": None,
    "mkdir": None,
    "test-path": test_path,
    "get-item": get_item,
    "gi": get_item,
    "get-childitem": get_child_item,
    "gci": get_child_item,
    "dir": get_child_item,
    "ls": get_child_item,
    "move-item": move_item,
    "mv": move_item,
    "move": move_item,
    "remove-item": remove_item,
    "rm": remove_item,
    "del": remove_item,
    "ri": remove_item,
    "get-filehash": get_file_hash,
    "get-content": get_content,
    "gc": get_content,
    "cat": get_content,
    "type": get_content,
    "set-content": set_content,
    "sc": set_content,
    "join-path": join_path,
    "start-process": start_process,
    "start": start_process,
    "saps": start_process,
    "stop-process": stop_process,
    "kill": stop_process,
    "spps": stop_process,
    "get-process": get_process,
    "ps": get_process,
    "gps": get_process,
    "start-sleep": start_sleep,
    "sleep": start_sleep,
    "get-ciminstance": get_cim_instance,
    "gcim": get_cim_instance,
    "get-wmiobject": get_cim_instance,
    "gwmi": get_cim_instance,
    "get-pnpdevice": get_pnp_device,
    "get-winevent": get_win_event,
    "invoke-cimmethod": invoke_cim_method,
    "foreach-object": foreach_object,
    "%": foreach_object,
    "foreach": foreach_object,
    "where-object": where_object,
    "?": where_object,
    "where": where_object,
    "select-object": select_object,
    "select": select_object,
    "convertto-json": convertto_json,
    "write-output": write_output,
    "echo": write_output,
    "write": write_output,
    "write-host": write_output,
    "out-null": out_null,
    "out-string": out_string,
    "out-default": write_output,
    "format-list": format_list,
    "fl": format_list,
    "new-object": new_object,
    "write-error": write_error,
    "get-location": get_location,
    "pwd": get_location,
    "get-command": get_command,
    "gcm": get_command,
}
CMDLETS = {k: v for k, v in CMDLETS.items() if v is not None}


# ------------------------------------------------------------------ .NET members


def static_member(interp: Interp, t: Any, name: str) -> Any:
    if not isinstance(t, TypeRef):
        raise PSError("Unable to find type.", "InvalidOperation", "TypeNotFound")
    key = (t.name, name.lower())
    now = dt.datetime.now(dt.UTC)
    table = {
        ("datetimeoffset", "utcnow"): DateTime(now),
        ("datetime", "utcnow"): DateTime(now),
        ("datetime", "now"): DateTime(now, "Local"),
        ("environment", "processorcount"): int(interp.env.get("NUMBER_OF_PROCESSORS", os.cpu_count() or 1)),
        ("environment", "machinename"): interp.env.get("COMPUTERNAME", ""),
    }
    if key not in table:
        raise PSError(
            f"The property '{name}' cannot be found on type [{t.name}].",
            "InvalidOperation",
            "PropertyNotFound",
        )
    return table[key]


def static_call(interp: Interp, t: Any, name: str, args: list) -> Any:
    if not isinstance(t, TypeRef):
        raise PSError("Unable to find type.", "InvalidOperation", "TypeNotFound")
    key = (t.name, name.lower())
    if key == ("io.file", "openread"):
        host = interp.host(args[0])
        if not os.path.isfile(host):
            raise PSError(
                f'Exception calling "OpenRead" with "1" argument(s): "Could not find file '
                f"'{fs.from_host(host)}'.\"",
                "NotSpecified",
                "FileNotFoundException",
            )
        return FileStream(host)
    if key == ("io.file", "exists"):
        return os.path.isfile(interp.host(args[0]))
    if key == ("math", "min"):
        return min(to_num(args[0]), to_num(args[1]))
    if key == ("math", "max"):
        return max(to_num(args[0]), to_num(args[1]))
    if key in (("security.cryptography.sha256", "create"), ("security.cryptography.hashalgorithm", "create")):
        algo = to_str(args[0]).lower() if args else "sha256"
        return HashAlgorithm(algo)
    if key == ("convert", "tobase64string"):
        return base64.b64encode(bytes(args[0])).decode()
    if key == ("bitconverter", "tostring"):
        return "-".join(f"{b:02X}" for b in args[0])
    raise PSError(
        f"Method invocation failed because [{t.name}] does not contain a method named '{name}'.",
        "InvalidOperation",
        "MethodNotFound",
    )


def call_method(interp: Interp, obj: Any, name: str, args: list) -> Any:
    low = name.lower()
    if hasattr(obj, "call"):
        try:
            return obj.call(low, args)
        except AttributeError:
            pass
    if isinstance(obj, DateTime):
        if low == "tounixtimemilliseconds":
            return obj.to_unix_ms()
        if low == "tostring":
            return (
                obj.when.strftime(
                    to_str(args[0])
                    .replace("yyyy", "%Y")
                    .replace("MM", "%m")
                    .replace("dd", "%d")
                    .replace("HH", "%H")
                    .replace("mm", "%M")
                    .replace("ss", "%S")
                )
                if args
                else str(obj)
            )
    if isinstance(obj, int) and low == "tostring":
        if args:
            f = to_str(args[0])
            if f.lower().startswith("x"):
                return format(obj, f"0{f[1:] or 1}{f[0]}")
            if f.upper().startswith("D"):
                return str(obj).zfill(int(f[1:] or 0))
        return str(obj)
    if isinstance(obj, str):
        if low == "trim":
            return obj.strip()
        if low == "toupper":
            return obj.upper()
        if low == "tolower":
            return obj.lower()
        if low == "tostring":
            return obj
        if low == "startswith":
            return (
                obj.lower().startswith(to_str(args[0]).lower()) if False else obj.startswith(to_str(args[0]))
            )
        if low == "split":
            return obj.split(to_str(args[0]))
        if low == "replace":
            return obj.replace(to_str(args[0]), to_str(args[1]))
    if low == "tostring":
        return to_str(obj)
    if low == "kill" and isinstance(obj, Process) and same_persona(obj.pid):
        import signal

        os.kill(obj.pid, signal.SIGKILL)
        return None
    raise PSError(
        f"Method invocation failed because [{getattr(obj, 'type_name', type(obj).__name__)}] does not "
        f"contain a method named '{name}'.",
        "InvalidOperation",
        "MethodNotFound",
    )


# ------------------------------------------------------------------ native programs


def _nvidia_smi(interp, args, out, err):
    if not args:
        text = _data(interp, "nvidia-smi.txt")
        if text is None:
            raise _nr("nvidia-smi")
        out.write(text)
        return 0
    raw = _data(interp, "nvidia-smi-gpu.json")
    if raw is None:
        raise _nr("nvidia-smi")
    return native.nvidia_query(json.loads(raw), args, out, err)


def _nr(name):
    from .values import not_recognized

    return not_recognized(name)


def _text(name, command):
    def run(interp, args, out, err):
        text = _data(interp, name)
        if text is None:
            raise _nr(command)
        out.write(text)
        return 0

    return run


def _wsl(interp, args, out, err):
    if any(a.lower() in ("--version", "-v") for a in args):
        text = _data(interp, "wsl-version.txt")
        if text is not None:
            out.write(text)
            return 0
    raise _nr("wsl")


def _hostname(interp, args, out, err):
    out.write(socket.gethostname() + "\n")
    return 0


def _taskkill(interp, args, out, err):
    return native.taskkill(args, out, err)


def _powershell(interp, args, out, err):
    raise AssertionError("powershell is resolved to the shim itself")  # pragma: no cover


NATIVE_BUILTINS = {
    "taskkill": _taskkill,
    "taskkill.exe": _taskkill,
    "nvidia-smi": _nvidia_smi,
    "nvidia-smi.exe": _nvidia_smi,
    "systeminfo": _text("systeminfo.txt", "systeminfo"),
    "systeminfo.exe": _text("systeminfo.txt", "systeminfo"),
    "wsl": _wsl,
    "wsl.exe": _wsl,
    "hostname": _hostname,
    "hostname.exe": _hostname,
}


def resolve_native(interp: Interp, name: str) -> str | None:
    """The program ``name`` names: an emulated Windows program, a file by path, or one on PATH."""
    low = name.lower()
    base = os.path.basename(low.replace("\\", "/"))
    if base in NATIVE_BUILTINS:
        return base
    if base in ("powershell", "powershell.exe", "pwsh", "pwsh.exe"):
        return shutil.which("powershell") or sys.argv[0]
    if base in ("cmd", "cmd.exe"):
        return shutil.which("cmd") or None
    if "/" in name or "\\" in name or fs.is_windows_path(name):
        host = interp.host(name)
        on_drive = host.startswith(fs.drive_root())
        for cand in (host, host + ".exe"):
            # Windows has no execute bit: a file on drive C is a program if it is one (launch_argv)
            if os.path.isfile(cand) and (on_drive or os.access(cand, os.X_OK)):
                return cand
        return None
    for cand in (name, name[:-4] if low.endswith(".exe") else None):
        if cand and (found := shutil.which(cand)):
            return found
    return None


COVERED = {
    "cmdlets": sorted(k for k in CMDLETS if "-" in k),
    "natives": sorted(k for k in NATIVE_BUILTINS if not k.endswith(".exe")) + ["powershell"],
    "static": [
        "[DateTimeOffset]::UtcNow",
        "[IO.File]::OpenRead",
        "[Math]::Min",
        "[Math]::Max",
        "[Security.Cryptography.SHA256]::Create",
        "[Environment]::ProcessorCount",
    ],
    "variables": [
        "$env:*",
        "$PID",
        "$LASTEXITCODE",
        "$ErrorActionPreference",
        "$null",
        "$true",
        "$false",
        "$_",
        "$?",
    ],
}
