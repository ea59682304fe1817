"""Run a command "inside" a persona: real processes on the lab host that see the device's files.

Both the sshd ForceCommand wrapper and the ADB emulator's shell go through
here, so every virtual device runs the same way. The work is done by the
standalone script ``_enter.py`` (stdlib only, ``python -I -S``: cheap enough
to run for every remote command).
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
from pathlib import Path

from edgelab.errors import ConfigError

ENTER_SCRIPT = Path(__file__).with_name("_enter.py")


def _python() -> str:
    return os.path.realpath(sys.executable)


def _check_dir(persona_dir: Path) -> Path:
    persona_dir = Path(persona_dir).resolve()
    if not persona_dir.is_dir():
        raise ConfigError(
            f"persona directory {persona_dir} does not exist",
            remedy="use a directory under edgelab/sim/personas/ (see `edgelab sim status`)",
        )
    return persona_dir


def persona_argv(
    persona_dir: Path, argv: list[str], *, device_root: Path | None = None, drive: Path | None = None
) -> list[str]:
    """Argv that runs ``argv`` in a private mount namespace showing the persona's files.

    ``persona_dir`` holds ``root/`` (files overlaid at their absolute paths) and
    ``bin/`` (shims first on PATH). ``device_root`` (optional, writable) provides
    the device's own ``/data`` and ``/sdcard``; ``drive`` (Windows personas) is shown as ``/C:``.
    Needs root or user namespaces.
    """
    if not argv:
        raise ValueError("empty command")
    persona_dir = _check_dir(persona_dir)
    out = [_python(), "-I", "-S", str(ENTER_SCRIPT), "--persona", str(persona_dir)]
    out += ["--hostname", persona_dir.name]
    if device_root is not None:
        out += ["--device-root", str(Path(device_root).resolve())]
    if drive is not None:
        out += ["--drive", str(Path(drive).resolve())]
    return out + ["--", *[str(a) for a in argv]]


@functools.cache
def check_can_enter(persona_dir: Path) -> None:
    """Enter ``persona_dir`` once with ``true``; raise ConfigError saying why not (cached per process).

    As root this needs ``unshare -m``; as an ordinary user it needs user
    namespaces. Without them every command on a virtual device would fail, so
    the lab refuses to start rather than come up with every device broken.
    """
    try:
        r = subprocess.run(
            persona_argv(persona_dir, ["true"]),
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        r = subprocess.CompletedProcess([], 125, "", str(e))
    if r.returncode == 0:
        return
    why = r.stderr.strip() or f"exit status {r.returncode}"
    if ".edgelab-persona-root-" in why:  # _enter.py refused a mountpoint it does not own
        remedy = "remove that directory (another account made it) and run `edgelab sim up` again"
    elif os.geteuid() == 0:
        remedy = "the lab host must allow unshare(CLONE_NEWNS); in a container, run it with CAP_SYS_ADMIN"
    else:
        remedy = (
            "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
            "user.max_user_namespaces > 0; on Ubuntu 24.04 also "
            "kernel.apparmor_restrict_unprivileged_userns=0), or run the lab as root"
        )
    raise ConfigError(
        f"cannot enter a virtual device's namespace as uid {os.geteuid()}: {why}", remedy=remedy
    )


def ssh_force_command(
    persona_dir: Path,
    shell: str = "posix",
    home: Path | str | None = None,
    drive: Path | None = None,
    wine: tuple[Path, Path] | None = None,
) -> str:
    """The sshd ``ForceCommand`` line that enters the persona and runs ``$SSH_ORIGINAL_COMMAND``.

    sftp requests are mapped to the real sftp-server inside the persona; a
    ``powershell`` persona hands the command to its PowerShell shim, as Windows
    OpenSSH does with a PowerShell default shell. ``home`` (writable) becomes the session's
    ``$HOME`` and working directory (for a Windows persona a path on its drive, ``/C:/Users/...``);
    ``drive`` (Windows personas) is the writable directory shown as drive C; ``wine`` (its own
    prefix, the shared template) is where its .exe files run (``winsim.native.launch_argv``). ``shell`` ``cmd`` is
    OpenSSH for Windows' default shell, ``powershell`` its DefaultShell alternative.
    """
    persona_dir = _check_dir(persona_dir)
    if shell not in ("posix", "powershell", "cmd"):
        raise ConfigError(
            f"unknown persona shell {shell!r}", remedy="use posix, powershell or cmd in persona.yaml"
        )
    argv = [_python(), "-I", "-S", str(ENTER_SCRIPT), "--persona", str(persona_dir)]
    argv += ["--hostname", persona_dir.name, "--ssh", shell]
    if home is not None:
        h = str(home) if str(home).startswith("/C:") else str(Path(home).resolve())
        argv[-2:-2] = ["--home", h]
    if drive is not None:
        argv[-2:-2] = ["--drive", str(Path(drive).resolve())]
    if wine is not None:
        argv[-2:-2] = [
            "--wineprefix",
            str(Path(wine[0]).resolve()),
            "--wine-template",
            str(Path(wine[1]).resolve()),
        ]
    return "exec " + shlex.join(argv)
