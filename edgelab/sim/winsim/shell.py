"""Entry points of the persona's ``powershell.exe`` and ``cmd.exe`` (the two default shells of
OpenSSH for Windows): their command-line options, as Microsoft documents them.

``powershell [-NoProfile] [-NonInteractive] [-NoLogo] [-ExecutionPolicy P] (-EncodedCommand B64 |
-Command TEXT... | -Command - )``; with neither and stdin not a terminal, the script is read from
stdin. ``cmd.exe /c LINE`` runs one line: ``%VAR%`` expansion, ``^`` escapes, ``&``, ``&&``, ``||``,
``echo``, ``exit /b N``; a program it cannot find is 9009 with cmd's message.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys

from . import fs
from .native import split_command_line
from .pseval import Interp, load_env, run_script

PERSONA = os.environ.get("EDGELAB_PERSONA_DIR")
JOB_VAR = "EDGELAB_WIN_JOB"


def end_job() -> None:
    """As the first process of an SSH session's job: kill the job's other processes, as Windows does
    when the job's last handle closes (processes made by Win32_Process.Create are not in it)."""
    job = os.environ.get(JOB_VAR)
    if job != str(os.getpid()):
        return
    import signal

    marker = f"{JOB_VAR}={job}".encode()
    from .objects import same_persona

    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            env = open(f"/proc/{entry}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if marker in env and same_persona(int(entry)):
            try:
                os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass


def session(main, args: list[str]) -> int:
    try:
        return main(args)
    finally:
        sys.stdout.flush()
        end_job()


def powershell_main(args: list[str]) -> int:
    script, i = None, 0
    while i < len(args):
        a = args[i].lower()
        if a in ("-noprofile", "-noninteractive", "-nologo", "-nop", "-noni", "-mta", "-sta"):
            i += 1
        elif a in (
            "-executionpolicy",
            "-ep",
            "-ex",
            "-outputformat",
            "-of",
            "-inputformat",
            "-if",
            "-windowstyle",
            "-w",
            "-version",
        ) and i + 1 < len(args):
            i += 2
        elif a in ("-encodedcommand", "-enc", "-e", "-ec") and i + 1 < len(args):
            try:
                script = base64.b64decode(args[i + 1], validate=True).decode("utf-16-le")
            except ValueError:
                sys.stderr.write(
                    "Cannot process the command because the value specified with -EncodedCommand is "
                    "not properly encoded. The value must be Base64 encoded.\n"
                )
                return 1
            i += 2
        elif a in ("-command", "-c"):
            script = " ".join(args[i + 1 :])
            break
        elif a.startswith("-") and a not in ("-",):
            sys.stderr.write(
                f"-{args[i].lstrip('-')} : The term '{args[i]}' is not recognized as a parameter.\n"
                "Windows PowerShell\n"
            )
            return 64
        else:
            script = " ".join(args[i:])
            break
    if script is None or script.strip() == "-":
        if sys.stdin.isatty():
            return interactive()
        script = sys.stdin.read()
    return run_script(script, Interp(load_env(PERSONA), PERSONA))


def interactive() -> int:
    interp = Interp(load_env(PERSONA), PERSONA)
    code = 0
    while True:
        sys.stdout.write(f"PS {interp.cwd}> ")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            return code
        code = run_script(line, interp)


# ------------------------------------------------------------------ cmd.exe

CMD_NOT_FOUND = (
    "'{0}' is not recognized as an internal or external command,\noperable program or batch file.\n"
)


def _cmd_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(load_env(PERSONA))
    env["PATH"] = os.environ.get("PATH", "")
    return env


def expand_percent(line: str, env: dict[str, str]) -> str:
    """%NAME% -> its value (case-insensitive); an undefined name stays as written, like cmd /c."""
    low = {k.lower(): v for k, v in env.items()}

    def sub(m: re.Match) -> str:
        return low.get(m.group(1).lower(), m.group(0))

    return re.sub(r"%([^%\s=]+)%", sub, line)


def split_operators(line: str) -> list[tuple[str, str]]:
    """[(operator before, segment)] on & && || outside quotes; ^ escapes the next character."""
    out: list[tuple[str, str]] = []
    buf: list[str] = []
    op, quoted, i = "", False, 0
    while i < len(line):
        ch = line[i]
        if ch == '"':
            quoted = not quoted
            buf.append(ch)
        elif ch == "^" and not quoted and i + 1 < len(line):
            buf.append(line[i + 1])
            i += 1
        elif not quoted and ch in "&|":
            two = line[i : i + 2]
            if two in ("&&", "||"):
                out.append((op, "".join(buf)))
                op, buf = two, []
                i += 2
                continue
            if ch == "&":
                out.append((op, "".join(buf)))
                op, buf = "&", []
            else:
                buf.append(ch)  # a pipe is left to the program line (not used by edgelab)
        else:
            buf.append(ch)
        i += 1
    out.append((op, "".join(buf)))
    return [(o, s.strip()) for o, s in out if s.strip() or o]


def cmd_run_line(segment: str, env: dict[str, str]) -> int:
    words = split_command_line(segment)
    if not words:
        return 0
    name = words[0]
    low = name.lower()
    if low == "echo" or low.startswith("echo."):
        sys.stdout.write(segment[4:].lstrip(" ") + "\n" if len(segment) > 4 else "ECHO is on.\n")
        sys.stdout.flush()
        return 0
    if low == "exit":
        rest = [w for w in words[1:] if w.lower() != "/b"]
        raise SystemExit(int(rest[0]) if rest and rest[0].lstrip("-").isdigit() else 0)
    if low == "ver":
        sys.stdout.write("\nMicrosoft Windows [Version 10.0.26100.4652]\n")
        return 0
    if low == "cd" and len(words) == 1:
        sys.stdout.write(fs.from_host(os.getcwd()) + "\n")
        return 0
    exe = None
    base = low.replace("\\", "/").rsplit("/", 1)[-1]
    if base in ("powershell", "powershell.exe", "pwsh", "pwsh.exe"):
        exe = shutil.which("powershell")
    elif "/" in name or "\\" in name:
        host = fs.to_host(name)
        exe = host if os.path.isfile(host) else (host + ".exe" if os.path.isfile(host + ".exe") else None)
    else:
        exe = shutil.which(name) or (shutil.which(name[:-4]) if low.endswith(".exe") else None)
    if exe is None:
        from .cmdlets import NATIVE_BUILTINS

        if base in NATIVE_BUILTINS:  # the emulated Windows programs (taskkill.exe, ...) live in the shim
            ps = shutil.which("powershell")
            if ps:
                from .quoting_ps import native_script

                sys.stdout.flush()
                return subprocess.run(
                    [ps, "-NoProfile", "-Command", native_script(words)], env=env
                ).returncode
        sys.stderr.write(CMD_NOT_FOUND.format(name))
        return 9009
    from .native import NotRunnable, launch_argv

    try:
        argv, wine_env = launch_argv(exe, words[1:])
    except NotRunnable as e:
        sys.stderr.write(f"{e}\n")
        return e.code
    sys.stdout.flush()
    return subprocess.run(argv, env={**env, **wine_env} if wine_env else env).returncode


def cmd_main(args: list[str]) -> int:
    i = 0
    line = None
    while i < len(args):
        a = args[i].lower()
        if a in ("/c", "/k", "/r"):
            line = " ".join(args[i + 1 :])
            break
        if (
            a in ("/d", "/s", "/q", "/u", "/a")
            or a.startswith("/e:")
            or a.startswith("/v:")
            or a.startswith("/f:")
        ):
            i += 1
            continue
        line = " ".join(args[i:])
        break
    if line is None:
        sys.stdout.write(
            "Microsoft Windows [Version 10.0.26100.4652]\n(c) Microsoft Corporation. All rights reserved.\n\n"
        )
        return 0
    if len(line) >= 2 and line[0] == '"' and line[-1] == '"' and line.count('"') == 2:
        line = line[1:-1]  # cmd /c "..." strips the outer quotes (the /s rule for one pair)
    env = _cmd_env()
    code = 0
    try:
        for op, seg in split_operators(expand_percent(line, env)):
            if op == "&&" and code != 0 or op == "||" and code == 0:
                continue
            code = cmd_run_line(seg, env)
    except SystemExit as e:
        return int(e.code or 0)
    return code
