"""The virtual SSH lab: ONE real OpenSSH sshd, one loopback address per persona.

Every address gets a ``Match LocalAddress`` block whose ForceCommand enters
that persona (see persona_exec) and runs the client's command there, so the
SSH side (keys, channels, sftp, exit codes) is the real OpenSSH and only the
device's files and commands are emulated. All state (keys, sshd_config, pid,
log, persona copies) lives in one directory; the lab generated its host key
itself, so it can hand out the fingerprint as trusted.

Layout of ``state_dir``: ``ssh/`` (keys, sshd_config, sshd.pid, sshd.log,
lab.json, personas/NAME), ``ssh_config`` (an OpenSSH client config with a
Host block per device) and ``known_hosts`` (the lab's host key per address).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

from edgelab.errors import ConfigError, TransportError
from edgelab.sim.persona_exec import ssh_force_command
from edgelab.sim.personas import Persona, list_personas, load_persona
from edgelab.sim.sweep import signal_all, sweep, wait_gone

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "ssh-keygen"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
DEFAULT_PORT = 2222
CLONE_OF = "orin-agx"
FIRST_CLONE_OCTET = 17


class SshDevice(NamedTuple):
    name: str
    address: str
    port: int
    shell: str
    device_class: str


@dataclass
class SshLabInfo:
    """What a client needs to reach the lab; ``client_key_path`` is the lab's own throwaway key."""

    pid: int
    port: int
    user: str
    client_key_path: Path
    host_key_fingerprint: str
    host_key_type: str
    host_public_key_line: str
    devices: list[SshDevice] = field(default_factory=list)
    state_dir: Path | None = None
    ssh_config_path: Path | None = None
    known_hosts_path: Path | None = None

    def device(self, name: str) -> SshDevice:
        for d in self.devices:
            if d.name == name:
                return d
        raise KeyError(name)

    def to_json(self) -> dict:
        data = asdict(self)
        data["devices"] = [d._asdict() for d in self.devices]
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in data.items()}


# ---------------------------------------------------------------- paths


def _ssh_dir(state_dir: Path) -> Path:
    return Path(state_dir).resolve() / "ssh"


def persona_home(state_dir: Path, device: str) -> Path:
    """The virtual device's own $HOME (its ``~/.edgelab/store`` lives there, not in the lab host's)."""
    return _ssh_dir(state_dir) / "homes" / device


def persona_drive(state_dir: Path, device: str) -> Path:
    """A Windows persona's drive C (bound at ``/C:`` inside it): profile, ProgramData, Temp."""
    return _ssh_dir(state_dir) / "drives" / device


def persona_wineprefix(state_dir: Path, device: str) -> Path:
    """A Windows persona's own wine prefix (made on its first .exe: registry, its drive's profiles)."""
    return _ssh_dir(state_dir) / "wine" / device


def wine_template() -> Path:
    """The wine prefix every persona's is made from (its C:\\windows, ~700 MB): once per lab host,
    in the build cache beside the runtime builds."""
    from edgelab.runtimes.cache import cache_root

    return cache_root() / "wine" / "template"


def _windows_session(persona: Persona) -> tuple[str, str]:
    """(OpenSSH DefaultShell: cmd | powershell, the profile dir as a namespace path) of a Windows persona."""
    default = str(persona.raw.get("ssh_default_shell", "powershell"))
    if default not in ("cmd", "powershell"):
        raise ConfigError(
            f"persona {persona.name}: ssh_default_shell {default!r} is not cmd or powershell",
            remedy="set ssh_default_shell: cmd (OpenSSH's default) or powershell in persona.yaml",
        )
    env_file = persona.path / "data" / "env.json"
    env = json.loads(env_file.read_text()) if env_file.is_file() else {}
    profile = str(env.get("USERPROFILE", "C:\\Users\\edgelab"))
    return default, "/C:" + profile[2:].replace("\\", "/")


def _prepare_drive(drive: Path, persona: Persona) -> None:
    """The folders a Windows installation has: the user profile with AppData, ProgramData, Temp."""
    env_file = persona.path / "data" / "env.json"
    env = json.loads(env_file.read_text()) if env_file.is_file() else {}
    for key in ("USERPROFILE", "LOCALAPPDATA", "APPDATA", "ProgramData", "TEMP", "SystemRoot"):
        value = env.get(key)
        if value and value[1:3] in (":\\", ":/"):
            (drive / value[3:].replace("\\", "/")).mkdir(parents=True, exist_ok=True)


def _pid_file(state_dir: Path) -> Path:
    return _ssh_dir(state_dir) / "sshd.pid"


def _config_file(state_dir: Path) -> Path:
    return _ssh_dir(state_dir) / "sshd_config"


def _info_file(state_dir: Path) -> Path:
    return _ssh_dir(state_dir) / "lab.json"


# ---------------------------------------------------------------- keys


def _keygen(path: Path, comment: str) -> None:
    if path.exists() and path.with_suffix(".pub").exists():
        return
    path.unlink(missing_ok=True)
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    path.chmod(0o600)


def fingerprint_of(public_line: str) -> tuple[str, str]:
    """(key type, "SHA256:...") of an OpenSSH public key line, as ``ssh-keygen -l`` prints it."""
    parts = public_line.split()
    blob = base64.b64decode(parts[1])
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return parts[0], f"SHA256:{digest}"


# ---------------------------------------------------------------- processes


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def _is_our_sshd(pid: int, state_dir: Path) -> bool:
    """True when ``pid`` is an sshd started with this lab's config (never trust a stale pid file)."""
    cmd = _cmdline(pid)
    return bool(cmd) and "sshd" in cmd[0] and str(_config_file(state_dir)) in " ".join(cmd)


def _read_pid(state_dir: Path) -> int | None:
    try:
        return int(_pid_file(state_dir).read_text().strip())
    except (OSError, ValueError):
        return None


def _running_pid(state_dir: Path) -> int | None:
    pid = _read_pid(state_dir)
    if pid and _alive(pid) and _is_our_sshd(pid, state_dir):
        return pid
    return None


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _descendants(pid: int) -> list[int]:
    kids = _children_map()
    out, todo = [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def persona_processes(state_dir: Path) -> list[int]:
    """Processes still running inside this lab's personas (marked by their environment)."""
    marker = f"EDGELAB_PERSONA_DIR={_ssh_dir(state_dir) / 'personas'}/".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if any(var.startswith(marker) for var in env.split(b"\0")):
            found.append(int(entry))
    return found


# ---------------------------------------------------------------- addresses and ports


def clone_address(index: int) -> str:
    """Loopback address of clone ``index`` (1-based): 127.0.0.17, .18, ... then 127.0.1.x."""
    n = FIRST_CLONE_OCTET + index - 1
    if n <= 254:
        return f"127.0.0.{n}"
    n -= 255
    return f"127.0.{1 + n // 254}.{1 + n % 254}"


def _port_free(addresses: list[str], port: int) -> bool:
    for addr in addresses:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((addr, port))
            except OSError:
                return False
    return True


def free_port(addresses: list[str] | None = None) -> int:
    """A TCP port free on every given loopback address (outside adb's 5555-5585 and 5037)."""
    addresses = addresses or ["127.0.0.1"]
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port != 5037 and not 5555 <= port <= 5585 and _port_free(addresses, port):
            return port
    raise TransportError("no free TCP port on the loopback addresses", remedy="close some listening servers")


def _wait_listening(address: str, port: int, pid: int, timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not _alive(pid):
            break
        try:
            with socket.create_connection((address, port), timeout=1.0) as s:
                if s.recv(4).startswith(b"SSH"):
                    return
        except OSError:
            time.sleep(0.05)
    raise TransportError(f"the lab's sshd did not answer on {address}:{port}", remedy="see the sshd log")


# ---------------------------------------------------------------- config


def _select_personas(names: list[str] | None) -> list[Persona]:
    if names is None:
        return list_personas("ssh")
    chosen = [load_persona(n) for n in names]
    for p in chosen:
        if p.transport != "ssh":
            raise ConfigError(
                f"persona {p.name} is an {p.transport} device", remedy="start it with the ADB lab"
            )
    return chosen


def _stage_personas(
    state_dir: Path, personas: list[Persona], clones: int
) -> list[tuple[str, str, Persona, Path]]:
    """Copy persona dirs into the state dir (clones get a copy under their own name)."""
    staged_root = _ssh_dir(state_dir) / "personas"
    if staged_root.exists():
        shutil.rmtree(staged_root)
    staged_root.mkdir(parents=True)
    plan: list[tuple[str, str, Persona, Path]] = []
    for p in personas:
        if not p.address:
            raise ConfigError(
                f"persona {p.name} has no address", remedy="set address: 127.0.0.X in persona.yaml"
            )
        plan.append((p.name, p.address, p, staged_root / p.name))
    if clones:
        base = load_persona(CLONE_OF)
        for i in range(1, clones + 1):
            name = f"{base.name}-c{i:02d}"
            plan.append((name, clone_address(i), base, staged_root / name))
    for _name, _addr, p, dst in plan:
        shutil.copytree(p.path, dst, symlinks=False)  # shims resolve to real files
    return plan


def conf_path(path: Path | str) -> str:
    """``path`` as one argument of an sshd_config / ssh_config line.

    Double quotes keep spaces in one argument. OpenSSH has no escape for ``"``
    or a newline there, and ``%`` would be read as a token (paramiko does not
    read ``%%`` back), so paths with those are refused.
    """
    text = str(path)
    bad = [c for c in ('"', "%", "\n", "\r") if c in text]
    if bad:
        raise ConfigError(
            f"the lab's state path {text!r} cannot be written into an OpenSSH config (it holds {bad[0]!r})",
            remedy="choose a state dir without double quotes, %, or newlines (--state-dir / EDGELAB_SIM_DIR)",
        )
    return f'"{text}"'


def _sshd_config(state_dir: Path, port: int, user: str, plan: list[tuple[str, str, Persona, Path]]) -> str:
    d = _ssh_dir(state_dir)
    lines = [
        "# written by edgelab.sim.sshd: the virtual SSH lab (loopback only)",
        *(f"ListenAddress {addr}:{port}" for _n, addr, _p, _d in plan),
        f"HostKey {conf_path(d / 'ssh_host_ed25519_key')}",
        f"PidFile {conf_path(d / 'sshd.pid')}",
        f"AuthorizedKeysFile {conf_path(d / 'authorized_keys')}",
        f"AllowUsers {user}",
        "StrictModes no",
        # bash sources ~/.bashrc for every ssh command (SSH_CLIENT set): the lab host's start-up
        # file, not the device's (a pyenv init: ~0.1 s CPU per exec). SHLVL=1 makes bash skip it.
        "SetEnv SHLVL=1",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "UsePAM no",
        "LogLevel VERBOSE",
        "MaxStartups 200:30:400",
        "MaxSessions 200",
        "PrintMotd no",
        "PrintLastLog no",
        "X11Forwarding no",
        "AllowTcpForwarding yes",
        "ClientAliveInterval 30",
        "AcceptEnv LANG LC_*",
        f"Subsystem sftp {SFTP_SERVER}",
    ]
    for name, addr, p, staged in plan:
        if p.shell == "powershell":  # a Windows persona: its drive C, its default shell, its profile
            default, profile = _windows_session(p)
            force = ssh_force_command(
                staged,
                default,
                home=profile,
                drive=persona_drive(state_dir, name),
                wine=(persona_wineprefix(state_dir, name), wine_template()),
            )
        else:
            force = ssh_force_command(staged, p.shell, home=persona_home(state_dir, name))
        lines += [f"Match LocalAddress {addr}", f"    ForceCommand {force}"]
    return "\n".join(lines) + "\n"


def _client_config(info: SshLabInfo) -> str:
    blocks = [f"# edgelab virtual SSH lab ({info.state_dir}); use: ssh -F {info.ssh_config_path} orin-agx"]
    for dev in info.devices:
        blocks.append(
            "\n".join(
                [
                    f"Host {dev.name}",
                    f"    HostName {dev.address}",
                    f"    Port {dev.port}",
                    f"    User {info.user}",
                    f"    IdentityFile {conf_path(info.client_key_path)}",
                    "    IdentitiesOnly yes",
                    "    StrictHostKeyChecking yes",
                    f"    UserKnownHostsFile {conf_path(info.known_hosts_path)}",
                    "    LogLevel ERROR",
                ]
            )
        )
    return "\n\n".join(blocks) + "\n"


def client_config(info: SshLabInfo) -> str:
    """OpenSSH client config (one Host block per virtual device) for plain ssh/scp/rsync."""
    return _client_config(info)


def _write_info(state_dir: Path, info: SshLabInfo) -> None:
    path = _info_file(state_dir)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info.to_json(), indent=2))
    os.replace(tmp, path)


def _load_info(state_dir: Path) -> SshLabInfo | None:
    try:
        data = json.loads(_info_file(state_dir).read_text())
    except (OSError, ValueError):
        return None
    for key in ("client_key_path", "state_dir", "ssh_config_path", "known_hosts_path"):
        if data.get(key):
            data[key] = Path(data[key])
    data["devices"] = [SshDevice(**d) for d in data.get("devices", [])]
    return SshLabInfo(**data)


def lab_user() -> str:
    """The account the lab's sshd runs as, from the passwd database (never $USER).

    As an ordinary user sshd can only authenticate itself, so the login name
    must be that of the effective uid even when $USER/$LOGNAME say otherwise.
    """
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        raise ConfigError(
            f"uid {os.geteuid()} has no passwd entry, and sshd cannot log in an account it cannot look up",
            remedy="run the lab as a user listed in /etc/passwd (in a container: add one with useradd)",
        ) from None


# ---------------------------------------------------------------- public API


def start_ssh_lab(
    state_dir: Path, personas: list[str] | None = None, *, port: int | None = None, clones: int = 0
) -> SshLabInfo:
    """Start (or keep) the lab's sshd; idempotent. Returns how to reach every device.

    Same personas/port/clones as the running lab: nothing happens. Different:
    the config is rewritten and sshd restarted.
    """
    if not Path(SSHD).is_file():
        raise ConfigError(
            f"{SSHD} is missing", remedy="install OpenSSH server: apt-get install openssh-server"
        )
    state_dir = Path(state_dir).resolve()
    d = _ssh_dir(state_dir)
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    user = lab_user()
    chosen = _select_personas(personas)
    addresses = [p.address for p in chosen if p.address] + [clone_address(i) for i in range(1, clones + 1)]

    running = _running_pid(state_dir)
    old = _load_info(state_dir) if running else None
    if port is None:
        port = (
            old.port
            if old
            else (DEFAULT_PORT if _port_free(addresses, DEFAULT_PORT) else free_port(addresses))
        )
    if old and old.port == port and old.user == user and [dev.address for dev in old.devices] == addresses:
        want = [p.name for p in chosen] + [f"{CLONE_OF}-c{i:02d}" for i in range(1, clones + 1)]
        if [dev.name for dev in old.devices] == want:
            return old
    if running:
        stop_ssh_lab(state_dir)
    if not _port_free(addresses, port):
        raise TransportError(
            f"port {port} is taken on a lab address",
            remedy="choose another with --port, or stop what listens there",
        )

    _keygen(d / "ssh_host_ed25519_key", "edgelab-sim-host")
    _keygen(d / "client_ed25519", "edgelab-sim-client")
    client_pub = (d / "client_ed25519.pub").read_text().strip()
    (d / "authorized_keys").write_text(client_pub + "\n")
    host_pub = (d / "ssh_host_ed25519_key.pub").read_text().strip()
    key_type, fp = fingerprint_of(host_pub)
    host_pub_line = " ".join(host_pub.split()[:2])

    plan = _stage_personas(state_dir, chosen, clones)
    for name, _addr, p, _staged in plan:
        persona_home(state_dir, name).mkdir(parents=True, exist_ok=True, mode=0o700)
        if p.shell == "powershell":
            persona_drive(state_dir, name).mkdir(parents=True, exist_ok=True, mode=0o700)
            _prepare_drive(persona_drive(state_dir, name), p)
    config = _config_file(state_dir)
    config.write_text(_sshd_config(state_dir, port, user, plan))
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    check = subprocess.run([SSHD, "-t", "-f", str(config)], capture_output=True, text=True)
    if check.returncode != 0:
        raise ConfigError(f"sshd rejected the lab config: {check.stderr.strip()}", remedy=f"see {config}")

    log = d / "sshd.log"
    _pid_file(state_dir).unlink(missing_ok=True)
    # sshd daemonizes (fork + setsid): the parent exits once the listener is up.
    subprocess.run(
        [SSHD, "-f", str(config), "-E", str(log)],
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    pid = None
    end = time.monotonic() + 10
    while time.monotonic() < end and pid is None:
        pid = _running_pid(state_dir)
        if pid is None:
            time.sleep(0.05)
    if pid is None:
        tail = log.read_text()[-500:] if log.exists() else ""
        raise TransportError(f"the lab's sshd did not start: {tail.strip()}", remedy=f"see {log}")
    _wait_listening(addresses[0], port, pid)

    known_hosts = state_dir / "known_hosts"
    known_hosts.write_text("".join(f"[{addr}]:{port} {host_pub_line}\n" for addr in addresses))
    info = SshLabInfo(
        pid=pid,
        port=port,
        user=user,
        client_key_path=d / "client_ed25519",
        host_key_fingerprint=fp,
        host_key_type=key_type,
        host_public_key_line=host_pub_line,
        devices=[SshDevice(name, addr, port, p.shell, p.device_class) for name, addr, p, _s in plan],
        state_dir=state_dir,
        ssh_config_path=state_dir / "ssh_config",
        known_hosts_path=known_hosts,
    )
    info.ssh_config_path.write_text(_client_config(info))
    _write_info(state_dir, info)
    return info


def ssh_lab_status(state_dir: Path) -> SshLabInfo | None:
    """The running lab's info, or None when its sshd is not running."""
    if _running_pid(state_dir) is None:
        return None
    return _load_info(state_dir)


def stop_ssh_lab(state_dir: Path) -> None:
    """Stop the lab's sshd, its sessions and every process still inside its personas; verify they are gone."""
    state_dir = Path(state_dir).resolve()
    pid = _running_pid(state_dir)
    victims: list[int] = []
    if pid is not None:
        victims = [pid, *_descendants(pid)]
        signal_all([pid], signal.SIGTERM)
    victims += persona_processes(state_dir)
    signal_all(victims, signal.SIGTERM)
    left = wait_gone(victims, 3.0)
    if left:
        signal_all(left, signal.SIGKILL)
        left = wait_gone(left, 3.0)
    if left:
        raise TransportError(f"lab processes survived stop: {left}", remedy="kill them by pid")
    if _ssh_dir(state_dir).is_dir():
        sweep(_ssh_dir(state_dir))  # what left the personas' sessions (detached, or environment cleared)
    _pid_file(state_dir).unlink(missing_ok=True)
