"""Windows paths on a persona's drive: ``C:\\Users\\edgelab`` is ``/C:/Users/edgelab`` in the namespace.

The persona's namespace binds a writable per-device directory at ``/C:`` (see ``_enter.py
--drive``), where OpenSSH for Windows' SFTP server shows drive C as well, so SFTP and PowerShell
name the same file the same way. Windows file names are case-insensitive and accept ``/`` as well
as ``\\``; a path the drive does not hold (a POSIX absolute path, such as the lab host's Python)
passes through unchanged.
"""

from __future__ import annotations

import os
import re

_DRIVE = re.compile(r"^([A-Za-z]):(?:[\\/]|$)")


def drive_root(letter: str = "C") -> str:
    return f"/{letter.upper()}:"


def is_windows_path(path: str) -> bool:
    return bool(_DRIVE.match(path))


def _match_case(parent: str, name: str) -> str:
    """``name`` as the directory spells it (case-insensitive lookup), else as given."""
    if os.path.lexists(os.path.join(parent, name)):
        return name
    try:
        low = name.lower()
        for entry in os.listdir(parent):
            if entry.lower() == low:
                return entry
    except OSError:
        pass
    return name


def to_host(path: str, cwd: str | None = None) -> str:
    """The namespace path of a Windows path (relative ones against ``cwd``, a Windows path)."""
    p = path.replace("\\", "/")
    m = _DRIVE.match(path)
    if m:
        base, rest = drive_root(m[1]), p[2:]
    elif p.startswith("/"):
        return p  # already a namespace path (lab host files, /C:/...)
    else:
        base_win = cwd or from_host(os.getcwd())
        return to_host(base_win.rstrip("\\/") + "\\" + path) if base_win else p
    out = base
    for part in rest.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            out = os.path.dirname(out) if out != base else out
            continue
        out = os.path.join(out, _match_case(out, part))
    return out


def from_host(path: str) -> str:
    """The Windows spelling of a namespace path (``/C:/a/b`` -> ``C:\\a\\b``); others unchanged."""
    m = re.match(r"^/([A-Za-z]):(/.*)?$", path)
    if not m:
        return path
    rest = (m[2] or "/").replace("/", "\\")
    return f"{m[1].upper()}:{rest}"


def join(base: str, child: str) -> str:
    """``Join-Path``: one separator between the two."""
    if not base:
        return child
    return base.rstrip("\\/") + "\\" + child.lstrip("\\/")


def leaf(path: str) -> str:
    return re.split(r"[\\/]", path.rstrip("\\/"))[-1]
