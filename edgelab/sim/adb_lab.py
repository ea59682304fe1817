"""The virtual ADB lab: the device emulator plus a real adb server of its own, wired together.

The adb server gets its own port and its own HOME (so it never touches the
operator's ~/.android or the default server on 5037), USB and mDNS off, and
no emulator-port scan (an adb server scans 5555-5585 for emulators, so our
devices live on 5586 and above). Both processes are recorded in
``<state_dir>/adb/lab.json``; ``stop_adb_lab`` ends exactly those pids.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import yaml

from edgelab.errors import TransportError
from edgelab.sim.adb_emulator.device import PERSONAS_DIR
from edgelab.sim.sweep import sweep
from edgelab.transport.adb.server import host_query, list_devices

ADB_PERSONAS = ["s25", "s24", "rb3g2", "sa8775p"]
FORBIDDEN_PORTS = range(5555, 5586)  # adb's emulator scan range
LOCKED_SUFFIX = "-locked"


class AdbLabDevice(NamedTuple):
    name: str
    serial: str  # "127.0.0.1:PORT"
    state: str  # adb's word: device, offline, unauthorized; "absent" when the server does not list it
    device_class: str | None


@dataclass
class AdbLabInfo:
    adb_server: str  # "127.0.0.1:PORT"
    server_pid: int
    emulator_pid: int
    adb_path: str
    devices: list[AdbLabDevice] = field(default_factory=list)
    state_dir: Path | None = None

    def device(self, name: str) -> AdbLabDevice:
        for d in self.devices:
            if d.name == name:
                return d
        raise KeyError(name)


def adb_binary() -> str:
    """The adb the transport's adbutils would use (``ADBUTILS_ADB_PATH`` first), so both agree."""
    from edgelab.transport.adb.server import adb_binary as binary

    return binary()


def _lab_dir(state_dir: Path) -> Path:
    return Path(state_dir) / "adb"


def _port_free(port: int, *, reuse: bool = False) -> bool:
    """Whether nothing holds ``port``. ``reuse``: whether a server could listen on it now, with
    SO_REUSEADDR as the adb server sets it, so the connections a stopped lab left in TIME-WAIT do
    not count (an operator's ``--adb-port`` right after ``sim down``); a port picked for a device
    stays a strictly free one."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if reuse:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port(start: int | None = None, taken: set[int] | frozenset[int] = frozenset()) -> int:
    """First free loopback port from ``start`` (never in adb's scan range); any free one if None."""
    if start is None:
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in FORBIDDEN_PORTS and port not in taken:
                return port
    port = max(start, 5586) if start in FORBIDDEN_PORTS else start
    while port < 65536:
        if port not in FORBIDDEN_PORTS and port not in taken and _port_free(port):
            return port
        port += 1
    raise TransportError(f"no free port from {start}")


def persona_class(persona: str) -> str | None:
    try:
        data = yaml.safe_load((PERSONAS_DIR / persona / "persona.yaml").read_text())
        return data.get("device_class")
    except (OSError, yaml.YAMLError):
        return None


# -- process bookkeeping -------------------------------------------------------
def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)  # reap it if it is our child and has exited
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _stop_pid(pid: int | None, expect: str, grace: float = 5.0) -> None:
    """TERM then KILL ``pid``, only if it is still the process we started (its cmdline has ``expect``)."""
    if not _pid_alive(pid) or expect not in _cmdline(pid):
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if not _pid_alive(pid):
                return
            time.sleep(0.05)
    if _pid_alive(pid):
        raise TransportError(f"process {pid} ({expect}) survived SIGKILL")


def _wait_for(predicate, timeout: float, what: str, log: Path | None = None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    tail = ""
    if log is not None and log.is_file():
        tail = " | " + " / ".join(log.read_text(errors="replace").splitlines()[-5:])
    raise TransportError(
        f"{what} did not come up within {timeout:g}s{tail}", remedy="see the log in the lab state dir"
    )


def _server_env(lab: Path, port: int, adb_path: str) -> dict[str, str]:
    env = dict(os.environ)
    home = lab / "home"
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        ANDROID_USER_HOME=str(home / ".android"),
        ANDROID_ADB_SERVER_PORT=str(port),
        ADB_LOCAL_TRANSPORT_MAX_PORT="5553",  # no emulator scan at all
        ADB_MDNS="0",
        ADB_MDNS_AUTO_CONNECT="",
        ADB_USB="0",  # never claim the operator's real phones
        ADBUTILS_ADB_PATH=adb_path,
    )
    env.pop("ANDROID_SERIAL", None)
    env.pop("ADB_SERVER_SOCKET", None)
    return env


# -- state file --------------------------------------------------------------
def _read_state(lab: Path) -> dict | None:
    try:
        return json.loads((lab / "lab.json").read_text())
    except (OSError, ValueError):
        return None


def _write_state(lab: Path, state: dict) -> None:
    tmp = lab / "lab.json.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, lab / "lab.json")


def _server_up(server: str) -> bool:
    try:
        host_query(server, "host:version", timeout=1.0)
        return True
    except TransportError:
        return False


def _states(server: str) -> dict[str, str]:
    try:
        return dict(list_devices(server, timeout=3.0))
    except TransportError:
        return {}


def _info(lab: Path, state: dict, states: dict[str, str] | None = None) -> AdbLabInfo:
    server = f"127.0.0.1:{state['server_port']}"
    states = _states(server) if states is None else states
    devices = [
        AdbLabDevice(d["name"], d["serial"], states.get(d["serial"], "absent"), d.get("device_class"))
        for d in state["devices"]
    ]
    return AdbLabInfo(
        server, state["server_pid"], state["emulator_pid"], state["adb_path"], devices, lab.parent
    )


# -- the three calls ------------------------------------------------------------
def adb_lab_status(state_dir: Path) -> AdbLabInfo | None:
    """The running lab with each device's live state, or None when no part of it runs."""
    lab = _lab_dir(state_dir)
    state = _read_state(lab)
    if state is None:
        return None
    if not _pid_alive(state.get("server_pid")) and not _pid_alive(state.get("emulator_pid")):
        return None
    return _info(lab, state)


def _start_emulator(lab: Path, devices: list[dict]) -> subprocess.Popen:
    argv = [sys.executable, "-m", "edgelab.sim.adb_emulator", "--state-dir", str(lab)]
    for d in devices:
        spec = f"{d['name']}={d['persona']}:{d['port']}" + (":auth" if d["locked"] else "")
        argv += ["--device", spec]
    (lab / "emulator.pid").unlink(missing_ok=True)
    log = lab / "emulator.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
        )

    def ready() -> bool:
        if proc.poll() is not None:
            raise TransportError(
                f"the ADB emulator exited with {proc.returncode}: "
                + " / ".join(log.read_text(errors="replace").splitlines()[-3:]),
                remedy="see the log; a port may be in use",
            )
        return (lab / "emulator.pid").is_file()

    _wait_for(ready, 20.0, "the ADB emulator", log)
    return proc


def _start_server(lab: Path, port: int, adb_path: str, listen_all: bool = False) -> subprocess.Popen:
    log = lab / "adb-server.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [adb_path, *(["-a"] if listen_all else []), "-P", str(port), "server", "nodaemon"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=_server_env(lab, port, adb_path),
            start_new_session=True,
            cwd=str(lab),
        )
    server = f"127.0.0.1:{port}"

    def ready() -> bool:
        if proc.poll() is not None:
            raise TransportError(f"the adb server exited with {proc.returncode}", remedy=f"see {log}")
        return _server_up(server)

    _wait_for(ready, 20.0, "the adb server", log)
    return proc


def _connect_all(server: str, devices: list[dict], timeout: float = 30.0) -> None:
    """``adb connect`` each device and wait until it is ready (``device``, or ``unauthorized`` if locked).

    A device whose emulator restarted stays offline (or vanishes while the
    server retries) until it is disconnected and connected afresh, so every
    device not ready is re-linked every few seconds until the deadline.
    """

    def want(d: dict) -> str:
        return "unauthorized" if d["locked"] else "device"

    def relink(states: dict[str, str], fresh: bool) -> None:
        for d in devices:
            state = states.get(d["serial"])
            if state == want(d):
                continue
            if state is not None and (fresh or state != "connecting"):
                host_query(server, f"host:disconnect:{d['serial']}")
            host_query(server, f"host:connect:{d['serial']}")

    relink(_states(server), fresh=False)
    end = time.monotonic() + timeout
    next_relink = time.monotonic() + 3.0
    while time.monotonic() < end:
        now = _states(server)
        if all(now.get(d["serial"]) == want(d) for d in devices):
            return
        if time.monotonic() >= next_relink:
            relink(now, fresh=True)
            next_relink = time.monotonic() + 3.0
        time.sleep(0.1)
    now = _states(server)
    bad = {d["name"]: now.get(d["serial"], "absent") for d in devices if now.get(d["serial"]) != want(d)}
    raise TransportError(
        f"virtual ADB devices not ready: {bad}", remedy="see adb-server.log and emulator.log"
    )


def start_adb_lab(
    state_dir: Path,
    personas: list[str] | None = None,
    *,
    server_port: int | None = None,
    base_port: int = 5586,
    locked: list[str] | tuple[str, ...] = (),
    listen_all: bool = False,
) -> AdbLabInfo:
    """Start (or find running) the emulator and its adb server, and connect every device.

    ``listen_all`` is ``adb -a``: the server listens on every address of its host, for a lab host that
    serves its phones to others (only ever inside a network namespace of the lab's own, see sim.labhost).

    ``locked`` personas are served a second time as ``NAME-locked``, a device
    that demands authorization and never grants it (adb shows ``unauthorized``).
    """
    lab = _lab_dir(state_dir)
    lab.mkdir(parents=True, exist_ok=True)
    personas = list(personas or ADB_PERSONAS)
    for p in [*personas, *locked]:
        if not (PERSONAS_DIR / p / "persona.yaml").is_file():
            raise TransportError(f"no ADB persona {p!r}", remedy=f"choose from {', '.join(ADB_PERSONAS)}")
    wanted = [(p, p, False) for p in personas] + [(p + LOCKED_SUFFIX, p, True) for p in locked]

    state = _read_state(lab)
    if state is not None:
        same = [(d["name"], d["persona"], d["locked"]) for d in state["devices"]] == wanted
        if same and _pid_alive(state["server_pid"]) and _server_up(f"127.0.0.1:{state['server_port']}"):
            if not _pid_alive(state["emulator_pid"]):
                state["emulator_pid"] = _start_emulator(lab, state["devices"]).pid
                _write_state(lab, state)
            _connect_all(f"127.0.0.1:{state['server_port']}", state["devices"])
            return _info(lab, state)
        stop_adb_lab(state_dir)

    adb_path = adb_binary()
    taken: set[int] = set()
    devices = []
    port = base_port
    for name, persona, is_locked in wanted:
        port = free_port(port, taken)
        taken.add(port)
        devices.append(
            {
                "name": name,
                "persona": persona,
                "port": port,
                "serial": f"127.0.0.1:{port}",
                "locked": is_locked,
                "device_class": persona_class(persona),
            }
        )
    sport = server_port or free_port(None, taken)
    if not _port_free(sport, reuse=True):
        raise TransportError(f"port {sport} for the adb server is in use", remedy="pick another --adb-port")
    state = {
        "server_port": sport,
        "server_pid": None,
        "emulator_pid": None,
        "adb_path": adb_path,
        "devices": devices,
    }
    _write_state(lab, state)
    try:
        state["emulator_pid"] = _start_emulator(lab, devices).pid
        _write_state(lab, state)
        state["server_pid"] = _start_server(lab, sport, adb_path, listen_all).pid
        _write_state(lab, state)
        _connect_all(f"127.0.0.1:{sport}", devices)
    except BaseException:
        stop_adb_lab(state_dir)
        raise
    return _info(lab, state)


def kill_lab_processes(info: AdbLabInfo) -> None:
    """Stop the two processes of ``info`` by pid even if the state dir is gone (a test's last resort)."""
    _stop_pid(info.server_pid, "adb")
    _stop_pid(info.emulator_pid, "edgelab.sim.adb_emulator")


def stop_adb_lab(state_dir: Path) -> None:
    """Kill the adb server and the emulator (exactly the recorded pids), then every process the
    emulator ever started for this lab (:mod:`edgelab.sim.sweep`); leaves no process behind."""
    lab = _lab_dir(state_dir)
    state = _read_state(lab)
    if state is None:
        if lab.is_dir():
            sweep(lab)  # the servers are gone (killed?): what they started may still run
        return
    server_pid, emu_pid = state.get("server_pid"), state.get("emulator_pid")
    if _pid_alive(server_pid):
        try:
            host_query(f"127.0.0.1:{state['server_port']}", "host:kill", timeout=2.0)
        except TransportError:
            pass
        end = time.monotonic() + 5.0
        while _pid_alive(server_pid) and time.monotonic() < end:
            time.sleep(0.05)
    _stop_pid(server_pid, "adb")
    _stop_pid(emu_pid, "edgelab.sim.adb_emulator")
    sweep(lab)
    for name in ("lab.json", "emulator.pid"):
        (lab / name).unlink(missing_ok=True)
