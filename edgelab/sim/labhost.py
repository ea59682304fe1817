"""A second virtual lab host: a network namespace of its own with its adb server, phones and SSH devices.

What a lab that grew past one machine looks like, made on this one: ``labhost2`` is a network
namespace joined to this host by a veth pair (``198.18.B.1`` here, ``198.18.B.2`` there (or 198.19.B): RFC 2544's
benchmarking range, in a /24 that no route of this host but the default covers). Inside it run, as processes of that namespace:

- the project's ADB emulator behind a real adb server on ``*:5037`` (``adb -a``: reachable at
  ``198.18.B.2:5037``, and on the namespace's own loopback for an ``ssh://`` tunnel);
- the virtual SSH lab (personas on the namespace's 127.0.0.x), which nothing outside can reach;
- a real OpenSSH sshd on ``198.18.B.2:22``: the only way in, a jump host and the tunnel host, which
  forwards TCP and runs no command (ForceCommand says so).

Every address lives on the veth pair the lab made, and deleting the namespace removes the pair.
``stop`` ends every process of the namespace by pid (``ip netns pids``: they are all the lab's),
then deletes it. Needs root (``ip netns add``); ``unavailable()`` says why not otherwise.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from edgelab.errors import TransportError

NETNS_PREFIX = "labhost2-"  # not "edgelab": the persona tests check no edgelab mount shows on this host
ADB_PORT = 5037  # the namespace's own port space: the default port, as on a real lab host
GATEWAY_PORT = 22
SSH_PERSONAS = ["orin-agx"]
ADB_PERSONAS = ["s25", "rb3g2"]


@dataclass
class LabHost:
    """How to reach the second lab host; ``ssh``/``adb`` describe its labs as seen from inside it."""

    netns: str
    address: str  # labhost2's address on the veth (198.18.B.2)
    peer: str  # this host's end (198.18.B.1)
    state_dir: Path
    gateway_port: int
    gateway_fingerprint: str
    gateway_key_line: str  # "ssh-ed25519 AAAA..."
    user: str
    client_key_path: Path  # authorized on the gateway and on every SSH persona inside
    ssh: object  # edgelab.sim.sshd.SshLabInfo (addresses are the namespace's loopback)
    adb: object  # edgelab.sim.adb_lab.AdbLabInfo (serials are the namespace's loopback)

    @property
    def adb_server(self) -> str:
        return f"{self.address}:{ADB_PORT}"


def unavailable() -> str | None:
    """Why a namespace cannot be made here (None when it can)."""
    if sys.platform != "linux":
        return "network namespaces are Linux only"
    if shutil.which("ip") is None:
        return "no `ip` command (install iproute2)"
    if os.geteuid() != 0:
        return "creating a network namespace needs root (ip netns add)"
    if not Path("/usr/sbin/sshd").is_file():
        return "no OpenSSH server (/usr/sbin/sshd)"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and res.returncode != 0:
        raise TransportError(f"ip {' '.join(args)}: {res.stderr.strip()}", remedy="run as root with iproute2")
    return res


def _subnet_in_use(prefix: str) -> bool:
    """True when an address or any route but the default already covers ``prefix.0/24``: a /24
    of ours would shadow it for every process of this host while the namespace lives."""
    if f"inet {prefix}." in _ip("-4", "addr", "show").stdout:
        return True
    routes = _ip("-4", "route", "show", "match", f"{prefix}.0/24").stdout.splitlines()
    return any(r.strip() and not r.startswith("default") for r in routes)


def _make_netns(name: str, host_if: str) -> tuple[str, str]:
    """The namespace, its loopback up, a veth pair with a free 198.18.B.0/24; returns (inside, this side)."""
    _ip("netns", "add", name)
    _ip("-n", name, "link", "set", "lo", "up")
    _ip("link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", name)
    rng = random.Random()
    for _ in range(50):
        prefix = f"198.{rng.randint(18, 19)}.{rng.randint(1, 254)}"  # 198.18.0.0/15, RFC 2544
        if _subnet_in_use(prefix):
            continue
        if _ip("addr", "add", f"{prefix}.1/24", "dev", host_if, check=False).returncode != 0:
            continue
        _ip("-n", name, "addr", "add", f"{prefix}.2/24", "dev", "eth0")
        _ip("link", "set", host_if, "up")
        _ip("-n", name, "link", "set", "eth0", "up")
        return f"{prefix}.2", f"{prefix}.1"
    raise TransportError(
        "no free 198.18.0.0/15 /24 for the second lab host",
        remedy="remove stale labhost2-* namespaces (ip netns list)",
    )


def _gateway_config(state: Path, address: str, user: str, authorized: Path) -> Path:
    from edgelab.sim.sshd import SFTP_SERVER, conf_path

    d = state / "gateway"
    d.mkdir(parents=True, exist_ok=True)
    key = d / "ssh_host_ed25519_key"
    if not key.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "edgelab-labhost2", "-f", str(key)],
            check=True,
            stdin=subprocess.DEVNULL,
        )
    lines = [
        "# written by edgelab.sim.labhost: the second lab host's gateway (inside its namespace only)",
        f"ListenAddress {address}:{GATEWAY_PORT}",
        f"HostKey {conf_path(key)}",
        f"PidFile {conf_path(d / 'sshd.pid')}",
        f"AuthorizedKeysFile {conf_path(authorized)}",
        f"AllowUsers {user}",
        "StrictModes no",
        "UsePAM no",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "AllowTcpForwarding yes",
        "X11Forwarding no",
        "PrintMotd no",
        "MaxSessions 50",
        "MaxStartups 100:30:200",
        "LogLevel VERBOSE",
        "ForceCommand echo 'labhost2: a jump host; it forwards TCP and runs no command'",
        f"Subsystem sftp {SFTP_SERVER}",
    ]
    conf = d / "sshd_config"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def _inside_start(state: Path, address: str) -> dict:
    """Run inside the namespace: the labs and the gateway; returns what the outside needs."""
    from edgelab.sim.adb_lab import start_adb_lab
    from edgelab.sim.sshd import fingerprint_of, free_port, start_ssh_lab

    ssh = start_ssh_lab(state / "ssh-lab", SSH_PERSONAS, port=free_port(["127.0.0.11"]))
    start_adb_lab(state / "adb-lab", ADB_PERSONAS, server_port=ADB_PORT, listen_all=True)
    authorized = ssh.state_dir / "ssh" / "authorized_keys"
    conf = _gateway_config(state, address, ssh.user, authorized)
    pid_file = conf.parent / "sshd.pid"
    pid_file.unlink(missing_ok=True)
    subprocess.run(
        ["/usr/sbin/sshd", "-f", str(conf), "-E", str(conf.parent / "sshd.log")],
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    end = time.monotonic() + 10
    while not pid_file.is_file() and time.monotonic() < end:
        time.sleep(0.05)
    if not pid_file.is_file():
        raise TransportError(
            "labhost2's gateway sshd did not start", remedy=f"see {conf.parent / 'sshd.log'}"
        )
    pub = (conf.parent / "ssh_host_ed25519_key.pub").read_text().strip()
    _type, fp = fingerprint_of(pub)
    return {
        "ssh_state": str(ssh.state_dir),
        "adb_state": str(state / "adb-lab"),
        "gateway_fingerprint": fp,
        "gateway_key_line": " ".join(pub.split()[:2]),
        "user": ssh.user,
        "client_key_path": str(ssh.client_key_path),
    }


def start(state_dir: Path, name: str | None = None) -> LabHost:
    """Make the namespace and start everything in it; on any failure, everything made is removed."""
    from edgelab.sim import adb_lab, sshd

    reason = unavailable()
    if reason:
        raise TransportError(f"cannot make a second lab host: {reason}", remedy="run the lab tests as root")
    state_dir = Path(state_dir).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid() % 100000}{random.randint(0, 99):02d}"
    netns, host_if = name or f"{NETNS_PREFIX}{tag}", f"lh2h{tag}"
    (state_dir / "netns").write_text(netns)
    try:
        address, peer = _make_netns(netns, host_if)
        proc = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                netns,
                sys.executable,
                "-m",
                "edgelab.sim.labhost",
                "inside",
                str(state_dir),
                address,
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        if proc.returncode != 0:
            raise TransportError(
                f"labhost2 did not start: {proc.stderr.strip()[-800:]}", remedy=f"see its logs in {state_dir}"
            )
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        ssh = sshd._load_info(Path(data["ssh_state"]))
        adb_state = adb_lab._read_state(adb_lab._lab_dir(Path(data["adb_state"])))
        adb = adb_lab._info(
            adb_lab._lab_dir(Path(data["adb_state"])),
            adb_state,
            states={d["serial"]: "device" for d in adb_state["devices"]},
        )
        return LabHost(
            netns,
            address,
            peer,
            state_dir,
            GATEWAY_PORT,
            data["gateway_fingerprint"],
            data["gateway_key_line"],
            data["user"],
            Path(data["client_key_path"]),
            ssh,
            adb,
        )
    except BaseException:
        stop(state_dir)
        raise


def _netns_pids(netns: str) -> list[int]:
    res = _ip("netns", "pids", netns, check=False)
    return [int(p) for p in res.stdout.split() if p.strip().isdigit()]


def stop(state_dir: Path) -> None:
    """End every process in the namespace (by pid: all of them are the lab's), then delete it and its veth."""
    state_dir = Path(state_dir).resolve()
    try:
        netns = (state_dir / "netns").read_text().strip()
    except OSError:
        return
    if not netns.startswith(NETNS_PREFIX):
        return
    if netns in _ip("netns", "list", check=False).stdout.split():
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
            pids = _netns_pids(netns)
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            end = time.monotonic() + wait
            while _netns_pids(netns) and time.monotonic() < end:
                time.sleep(0.05)
            if not _netns_pids(netns):
                break
        _ip("netns", "del", netns, check=False)  # takes its end of the veth pair, and so the pair
    (state_dir / "netns").unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "inside":
        print(json.dumps(_inside_start(Path(argv[1]), argv[2])))
        return 0
    print(
        "usage: python -m edgelab.sim.labhost inside STATE_DIR ADDRESS (run by start, inside the namespace)",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
