"""The .NET-shaped objects the PowerShell subset hands around: files, processes, dates, streams, hashes.

Each has the members PowerShell shows for it (``FileInfo.Length``, ``LastWriteTimeUtc.Ticks``,
``Process.Id``, ``FileStream.Read``, ``HashAlgorithm.TransformBlock``...). Member names are
case-insensitive as in PowerShell; ``members()`` lists the properties for output formatting.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import stat as st
from typing import Any

from . import fs

EPOCH_TICKS = 621355968000000000  # DateTime(1970-01-01).Ticks: 100 ns units since 0001-01-01


class PSObj:
    """A PSCustomObject / CIM instance: ordered properties."""

    type_name = "System.Management.Automation.PSCustomObject"

    def __init__(self, props: dict[str, Any], type_name: str | None = None):
        self.props = dict(props)
        if type_name:
            self.type_name = type_name

    def members(self) -> dict[str, Any]:
        return self.props


class DateTime:
    """System.DateTime (UTC kept internally)."""

    type_name = "System.DateTime"

    def __init__(self, when: dt.datetime, kind: str = "Utc"):
        self.when = when
        self.kind = kind

    @classmethod
    def from_epoch_ns(cls, ns: int, kind: str = "Utc") -> DateTime:
        return cls(dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=ns // 1000), kind)

    def ticks(self) -> int:
        delta = self.when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return EPOCH_TICKS + (delta.days * 86400 + delta.seconds) * 10**7 + delta.microseconds * 10

    def members(self) -> dict[str, Any]:
        return {"Ticks": self.ticks(), "Year": self.when.year, "Kind": self.kind}

    def to_unix_ms(self) -> int:
        return (self.ticks() - EPOCH_TICKS) // 10**4

    def __str__(self) -> str:
        w = self.when.astimezone() if self.kind == "Local" else self.when
        return w.strftime("%m/%d/%Y %I:%M:%S %p").lstrip("0")


class Item:
    """FileInfo / DirectoryInfo of a path on the persona's drive."""

    def __init__(self, host_path: str):
        self.host = host_path
        self.st = os.stat(host_path)

    @property
    def is_dir(self) -> bool:
        return st.S_ISDIR(self.st.st_mode)

    @property
    def type_name(self) -> str:
        return "System.IO.DirectoryInfo" if self.is_dir else "System.IO.FileInfo"

    def members(self) -> dict[str, Any]:
        full = fs.from_host(self.host)
        name = fs.leaf(full) or full
        m: dict[str, Any] = {
            "Mode": ("d-----" if self.is_dir else "-a----"),
            "LastWriteTime": DateTime.from_epoch_ns(self.st.st_mtime_ns, "Local"),
            "Name": name,
        }
        if not self.is_dir:
            m["Length"] = self.st.st_size
            m["Extension"] = os.path.splitext(name)[1]
            m["DirectoryName"] = full[: -len(name) - 1] if full.endswith(name) else ""
        m.update(
            FullName=full,
            PSIsContainer=self.is_dir,
            LastWriteTimeUtc=DateTime.from_epoch_ns(self.st.st_mtime_ns),
            CreationTimeUtc=DateTime.from_epoch_ns(self.st.st_ctime_ns),
        )
        return m


def _proc_stat(pid: int) -> list[str] | None:
    """/proc/PID/stat as [comm, state, ppid, pgrp, ...]: field k of proc(5) is index k - 2."""
    try:
        raw = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    head, _, rest = raw.rpartition(")")
    return [head.partition("(")[2], *rest.split()]


def proc_alive(pid: int) -> bool:
    f = _proc_stat(pid)
    return f is not None and f[1] not in ("Z", "X")


def same_persona(pid: int) -> bool:
    """Whether ``pid`` runs inside this persona (its environment names the same persona dir).

    The virtual Windows device only lets its own processes be killed, as a Windows user cannot kill
    another session's: a wrong pid can never reach the lab host's other processes.
    """
    mine = os.environ.get("EDGELAB_PERSONA_DIR")
    if not mine:
        return False
    try:
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        return False
    return f"EDGELAB_PERSONA_DIR={mine}".encode() in env


def proc_table() -> list[dict[str, Any]]:
    """Every live process: ProcessId, ParentProcessId, Name, CommandLine, WorkingSetSize."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        f = _proc_stat(int(entry))
        if f is None or f[1] in ("Z", "X"):
            continue
        try:
            cmd = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        except OSError:
            cmd = []
        args = [a.decode("utf-8", "replace") for a in cmd if a]
        name = os.path.basename(args[0]) if args else f[0]
        rss = int(f[22]) * os.sysconf("SC_PAGE_SIZE") if len(f) > 22 else 0
        out.append(
            {
                "ProcessId": int(entry),
                "ParentProcessId": int(f[2]),
                "Name": name,
                "CommandLine": " ".join(args),
                "WorkingSetSize": rss,
                "PeakWorkingSetSize": _hwm_kib(int(entry)),
            }
        )  # KiB, as Win32_Process has it
    return out


def _hwm_kib(pid: int) -> int:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Process:
    """System.Diagnostics.Process."""

    type_name = "System.Diagnostics.Process"

    def __init__(self, pid: int, name: str | None = None, popen=None):
        self.pid = pid
        self.name = name
        self.popen = popen  # set when this session started it: ExitCode is known once it ended

    def members(self) -> dict[str, Any]:
        f = _proc_stat(self.pid)
        exited = f is None or f[1] in ("Z", "X")
        name = self.name
        if name is None:
            try:
                argv0 = open(f"/proc/{self.pid}/cmdline", "rb").read().split(b"\0")[0].decode()
                name = os.path.splitext(os.path.basename(argv0))[0]
            except (OSError, IndexError):
                name = f[0] if f else ""
        ws = int(f[22]) * os.sysconf("SC_PAGE_SIZE") if f and len(f) > 22 else 0
        cpu = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK") if f and len(f) > 12 else 0
        code = self.popen.poll() if self.popen is not None else None
        return {
            "Id": self.pid,
            "ProcessName": name,
            "HasExited": exited or code is not None,
            "WorkingSet64": ws,
            "Handles": 0,
            "CPU": round(cpu, 2),
            "ExitCode": code,
        }


class FileStream:
    """System.IO.FileStream opened for reading."""

    type_name = "System.IO.FileStream"

    def __init__(self, host_path: str):
        self.f = open(host_path, "rb")

    def members(self) -> dict[str, Any]:
        return {"Length": os.fstat(self.f.fileno()).st_size, "Position": self.f.tell()}

    def call(self, name: str, args: list) -> Any:
        if name == "read":
            buf, off, n = args
            data = self.f.read(int(n))
            buf[int(off) : int(off) + len(data)] = data
            return len(data)
        if name == "seek":
            self.f.seek(
                int(args[0]),
                {"begin": 0, "current": 1, "end": 2}[str(args[1] if len(args) > 1 else "Begin").lower()],
            )
            return self.f.tell()
        if name in ("close", "dispose"):
            self.f.close()
            return None
        raise AttributeError(name)


class HashAlgorithm:
    """System.Security.Cryptography.SHA256 (and friends): incremental TransformBlock/TransformFinalBlock."""

    def __init__(self, algo: str):
        self.algo = algo
        self.h = hashlib.new(algo)
        self.digest: bytes | None = None

    @property
    def type_name(self) -> str:
        return f"System.Security.Cryptography.{self.algo.upper()}CryptoServiceProvider"

    def members(self) -> dict[str, Any]:
        return {
            "Hash": bytearray(self.digest) if self.digest is not None else None,
            "HashSize": self.h.digest_size * 8,
        }

    def call(self, name: str, args: list) -> Any:
        if name == "transformblock":
            buf, off, n = args[0], int(args[1]), int(args[2])
            self.h.update(bytes(buf[off : off + n]))
            return n
        if name == "transformfinalblock":
            buf, off, n = args[0], int(args[1]), int(args[2])
            self.h.update(bytes(buf[off : off + n]))
            self.digest = self.h.digest()
            return bytearray(buf[off : off + n])
        if name == "computehash":
            data = (
                bytes(args[0])
                if len(args) == 1
                else bytes(args[0][int(args[1]) : int(args[1]) + int(args[2])])
            )
            return bytearray(hashlib.new(self.algo, data).digest())
        if name in ("dispose", "clear"):
            return None
        raise AttributeError(name)


def type_name(value: Any) -> str:
    if hasattr(value, "type_name"):
        return value.type_name
    return {
        bool: "System.Boolean",
        int: "System.Int32",
        float: "System.Double",
        str: "System.String",
        list: "System.Object[]",
        bytearray: "System.Byte[]",
        type(None): "null",
    }.get(type(value), "System.Object")
