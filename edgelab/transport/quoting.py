"""Build remote command lines from argument lists, one quoting rule per shell.

User input is never concatenated into a command string: every argument goes
through the quoting function of the shell that will parse it.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from enum import StrEnum

_SAFE_POSIX = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


class Shell(StrEnum):
    """The shell that parses the command line on the far side."""

    POSIX = "posix"  # sh, bash, dash (Linux, WSL, Jetson)
    TOYBOX = "toybox"  # Android's mksh (toybox userland)
    POWERSHELL = "powershell"  # Windows OpenSSH with PowerShell


def quote_posix(arg: str) -> str:
    """Quote one argument for POSIX sh and Android's mksh.

    Single quotes stop every expansion in both shells; a literal single quote
    is closed, escaped and reopened. NUL cannot be passed through any shell.
    """
    if "\x00" in arg:
        raise ValueError("an argument cannot contain a NUL byte")
    if arg and _SAFE_POSIX.fullmatch(arg):
        return arg
    return "'" + arg.replace("'", "'\"'\"'") + "'"


def quote_powershell(arg: str) -> str:
    """Quote one argument as a PowerShell single-quoted string literal.

    Inside single quotes PowerShell expands nothing; the quote characters
    (ASCII and the typographic ones PowerShell also accepts) are doubled.
    """
    if "\x00" in arg:
        raise ValueError("an argument cannot contain a NUL byte")
    out = []
    for ch in arg:
        out.append(ch)
        if ch in "'\u2018\u2019\u201a\u201b":
            out.append(ch)
    return "'" + "".join(out) + "'"


def join_posix(argv: Sequence[str]) -> str:
    """A command line that runs ``argv`` exactly, for sh and mksh."""
    if not argv:
        raise ValueError("empty command")
    return " ".join(quote_posix(str(a)) for a in argv)


def join_powershell(argv: Sequence[str]) -> str:
    """A PowerShell statement that invokes ``argv[0]`` with the other arguments verbatim."""
    if not argv:
        raise ValueError("empty command")
    return "& " + " ".join(quote_powershell(str(a)) for a in argv)


def encode_powershell(script: str) -> list[str]:
    """Argv that runs a PowerShell script with no quoting at all (``-EncodedCommand``, UTF-16LE base64)."""
    encoded = base64.b64encode(script.encode("utf-16-le")).decode("ascii")
    return ["powershell", "-NoProfile", "-NonInteractive", "-EncodedCommand", encoded]


def join(argv: Sequence[str], shell: Shell) -> str:
    """Command line for ``argv`` in the given shell's syntax."""
    if shell is Shell.POWERSHELL:
        return join_powershell(argv)
    return join_posix(argv)
