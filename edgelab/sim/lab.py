"""The whole virtual lab: SSH lab + ADB lab, and its devices in the inventory.

``lab_up`` starts both labs (idempotent) and registers every virtual device
with virtual=True, its class and shell, and for SSH the host key the lab made
itself (so it is trusted without a prompt). ``lab_down`` stops both and marks
the devices offline; the rows stay, so history survives a restart.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from edgelab.config import state_dir as edgelab_state_dir
from edgelab.errors import ConfigError, EdgelabError, NotFound
from edgelab.sim import sshd
from edgelab.sim.personas import list_personas
from edgelab.sim.sshd import SshLabInfo
from edgelab.store.models import Device
from edgelab.transport.base import Endpoint
from edgelab.transport.quoting import Shell

Progress = Callable[[str], None]
VIRTUAL_TAG = "virtual"


def sim_dir(explicit: Path | str | None = None) -> Path:
    """The lab's state dir: ``--state-dir``, then ``EDGELAB_SIM_DIR``, then ``<edgelab state>/sim``."""
    if explicit:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get("EDGELAB_SIM_DIR")
    return Path(env).expanduser().resolve() if env else edgelab_state_dir() / "sim"


@dataclass
class LabStatus:
    state_dir: Path
    ssh: SshLabInfo | None
    adb: object | None  # edgelab.sim.adb_lab.AdbLabInfo
    skipped: list[str] | None = None  # names held by real (non-virtual) devices, left alone

    @property
    def running(self) -> bool:
        return self.ssh is not None or self.adb is not None


def _adb_lab():
    """The ADB lab module (a separate part; imported late so the SSH lab works without it)."""
    from edgelab.sim import adb_lab

    return adb_lab


def ssh_endpoint(info: SshLabInfo, name: str) -> Endpoint:
    """Endpoint to one SSH lab device with the lab's key and known_hosts (works for any state dir)."""
    dev = info.device(name)
    return Endpoint(
        name=dev.name,
        kind="ssh",
        ssh_user=info.user,
        ssh_host=dev.address,
        ssh_port=dev.port,
        host_key_fingerprint=info.host_key_fingerprint,
        shell=Shell(dev.shell),
        extra={"identity_file": str(info.client_key_path), "known_hosts": str(info.known_hosts_path)},
    )


def _descriptions() -> dict[str, str]:
    return {p.name: p.description for p in list_personas()}


def _ssh_rows(info: SshLabInfo) -> list[Device]:
    desc = _descriptions()
    base_of = {
        d.name: d.name.rsplit("-c", 1)[0] if d.name.startswith(f"{sshd.CLONE_OF}-c") else d.name
        for d in info.devices
    }
    return [
        Device(
            name=d.name,
            device_class=d.device_class,
            transport="ssh",
            ssh_user=info.user,
            ssh_host=d.address,
            ssh_port=d.port,
            shell=d.shell,
            host_key_fingerprint=info.host_key_fingerprint,
            host_key_type=info.host_key_type,
            tags=[VIRTUAL_TAG],
            notes=f"virtual: {desc.get(base_of[d.name], '')}".strip(),
            virtual=True,
        )
        for d in info.devices
    ]


def _adb_rows(info) -> list[Device]:
    desc = _descriptions()
    return [
        Device(
            name=d.name,
            device_class=d.device_class,
            transport="adb",
            adb_serial=d.serial,
            adb_server=info.adb_server,
            shell="toybox",
            tags=[VIRTUAL_TAG],
            notes=f"virtual: {desc.get(d.name, '')}".strip(),
            virtual=True,
        )
        for d in info.devices
    ]


def _check_ssh(info: SshLabInfo) -> dict[str, tuple[str, str | None]]:
    """Reach every SSH device for real (in parallel) through the SSH transport."""
    from edgelab.transport.ssh import SSHTransport

    def one(name: str) -> tuple[str, tuple[str, str | None]]:
        try:
            return name, SSHTransport.check(ssh_endpoint(info, name), timeout=10.0)
        except EdgelabError as e:
            return name, ("offline", str(e))

    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(pool.map(one, [d.name for d in info.devices]))


def register(db_url: str | None, status: LabStatus, *, check: bool = True) -> list[str]:
    """Upsert every virtual device into the database and record its state; returns names skipped.

    A name already used by a real (non-virtual) device is never overwritten.
    """
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.devices import get_device, record_state, upsert_device

    rows: list[Device] = []
    states: dict[str, tuple[str, str | None]] = {}
    if status.ssh:
        rows += _ssh_rows(status.ssh)
        states.update(_check_ssh(status.ssh) if check else {})
    if status.adb:
        rows += _adb_rows(status.adb)
        for d in status.adb.devices:
            states[d.name] = ("online", None) if d.state == "device" else (d.state, f"adb says {d.state}")
    skipped = []
    engine = get_engine(db_url)
    with session_scope(engine) as session:
        for row in rows:
            try:
                existing = get_device(session, row.name)
            except NotFound:
                existing = None
            if existing is not None and not existing.virtual:
                skipped.append(row.name)
                continue
            upsert_device(session, row)
            if row.name in states:
                record_state(session, row.name, *states[row.name])
    return skipped


def mark_offline(db_url: str | None, names: list[str] | None = None) -> list[str]:
    """Record every virtual device (or ``names``) as offline; returns the names marked."""
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.devices import list_devices, record_state

    engine = get_engine(db_url)
    marked = []
    with session_scope(engine) as session:
        for dev in list_devices(session):
            if dev.virtual and (names is None or dev.name in names):
                record_state(session, dev.name, "offline", "virtual lab stopped")
                marked.append(dev.name)
    return marked


def lab_up(
    state_dir: Path | None = None,
    *,
    db_url: str | None = None,
    ssh: bool = True,
    adb: bool = True,
    ssh_port: int | None = None,
    adb_port: int | None = None,
    clones: int = 0,
    register_devices: bool = True,
    progress: Progress | None = None,
) -> LabStatus:
    """Start the virtual lab (idempotent) and register its devices; returns what runs."""
    say = progress or (lambda _msg: None)
    sdir = sim_dir(state_dir)
    sdir.mkdir(parents=True, exist_ok=True)
    if clones < 0:
        raise ConfigError("--clones cannot be negative", remedy="use 0 or more")
    ssh_info = adb_info = None
    if ssh or adb:
        # Both kinds of device run their commands through the persona namespace.
        from edgelab.sim.persona_exec import check_can_enter
        from edgelab.sim.personas import PERSONAS_DIR

        check_can_enter(PERSONAS_DIR / "orin-agx")
    if ssh:
        say("starting the SSH lab (one sshd, a loopback address per persona)")
        ssh_info = sshd.start_ssh_lab(sdir, port=ssh_port, clones=clones)
        say(f"SSH lab up: sshd pid {ssh_info.pid}, port {ssh_info.port}, {len(ssh_info.devices)} devices")
    if adb:
        say("starting the ADB lab (device emulator + its own adb server)")
        adb_info = _adb_lab().start_adb_lab(sdir, server_port=adb_port)
        say(f"ADB lab up: adb server {adb_info.adb_server}, {len(adb_info.devices)} devices")
    status = LabStatus(sdir, ssh_info, adb_info)
    if register_devices:
        say("registering the virtual devices in the inventory")
        status.skipped = register(db_url, status)
    return status


def lab_status(state_dir: Path | None = None) -> LabStatus:
    sdir = sim_dir(state_dir)
    return LabStatus(sdir, sshd.ssh_lab_status(sdir), _adb_lab().adb_lab_status(sdir))


def lab_down(
    state_dir: Path | None = None, *, db_url: str | None = None, progress: Progress | None = None
) -> list[str]:
    """Stop both labs and mark the virtual devices offline: no process or mount left.

    The deployments this database knows on the lab's devices are stopped the normal way first. One
    that cannot be (its device was killed) is ended with everything else the lab started: the
    labs' stop sweeps the lab host for every process of theirs, whatever database recorded it
    (:mod:`edgelab.sim.sweep`), and such a run is then recorded stopped, its groups seen gone here."""
    say = progress or (lambda _msg: None)
    sdir = sim_dir(state_dir)
    before = lab_status(sdir)
    names = [d.name for d in (before.ssh.devices if before.ssh else [])]
    names += [d.name for d in (before.adb.devices if before.adb else [])]
    # and the virtual devices this database holds: a lab half killed lists only what still runs
    names += [n for n in _virtual_names(db_url) if n not in names]
    unreached: list[str] = []
    if names:
        ssh_config = before.ssh.ssh_config_path if before.ssh else None
        try:
            stop_lab_deployments(db_url, names, ssh_config, progress=say)
        except LabDeploymentsLeft as err:
            unreached = err.runs
            say(f"{err}; they end with the lab")
    say("stopping the SSH lab")
    sshd.stop_ssh_lab(sdir)
    say("stopping the ADB lab")
    _adb_lab().stop_adb_lab(sdir)
    if unreached:
        _record_ended_with_lab(db_url, unreached, say)
    return mark_offline(db_url, names or None)


class LabDeploymentsLeft(EdgelabError):
    """Deployments on the lab's devices the normal stop path could not end (``runs``)."""

    def __init__(self, message: str, runs: list[str], **kw):
        super().__init__(message, **kw)
        self.runs = runs


def _virtual_names(db_url: str | None) -> list[str]:
    """The virtual devices of this database (the lab is down already: what it had, by the rows)."""
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.devices import list_devices

    with session_scope(get_engine(db_url), write=False) as s:
        return [d.name for d in list_devices(s) if d.virtual]


def _record_ended_with_lab(db_url: str | None, run_ids: list[str], say: Progress) -> None:
    """Runs whose processes the lab's sweep ended: stopped (memory released) once every recorded
    group is seen gone on the lab host, where a virtual device's processes run."""
    from edgelab.deploy.transition import transition
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.deployments import DeploymentState, ProcessState, get_deployment, processes
    from edgelab.store.models import utcnow

    engine = get_engine(db_url)
    for run_id in run_ids:
        with session_scope(engine, write=False) as s:
            dep = get_deployment(s, run_id)
            pids = [p.pid for p in processes(s, dep.pk) if p.pid]
        if any(_alive_on_host(p) for p in pids):
            continue  # not proven gone: stays as it is, for `edgelab stop`

        def final(s, d) -> None:
            for row in processes(s, d.pk):
                row.state, row.stopped_at = ProcessState.KILLED, utcnow()
                s.add(row)
            d.to_stop = False
            d.error = "ended with the virtual lab (`sim down`): its device could not be reached to stop it"

        transition(
            engine, dep.pk, DeploymentState.STOPPED, phase=DeploymentState.STOPPED, edit=final, by="sim down"
        )
        say(f"{run_id}: stopped with the lab (its process groups are gone from the lab host)")


def status_json(status: LabStatus) -> dict:
    """``sim status --json``: every virtual device's address and state, and the adb server."""
    devices = []
    if status.ssh:
        for d in status.ssh.devices:
            devices.append(
                {
                    "name": d.name,
                    "transport": "ssh",
                    "address": d.address,
                    "port": d.port,
                    "user": status.ssh.user,
                    "shell": d.shell,
                    "device_class": d.device_class,
                    "state": "running",
                    "virtual": True,
                }
            )
    if status.adb:
        for d in status.adb.devices:
            host, _, port = d.serial.rpartition(":")
            devices.append(
                {
                    "name": d.name,
                    "transport": "adb",
                    "address": host,
                    "port": int(port),
                    "serial": d.serial,
                    "adb_server": status.adb.adb_server,
                    "shell": "toybox",
                    "device_class": d.device_class,
                    "state": d.state,
                    "virtual": True,
                }
            )
    return {
        "state_dir": str(status.state_dir),
        "running": status.running,
        "ssh": None
        if status.ssh is None
        else {
            "pid": status.ssh.pid,
            "port": status.ssh.port,
            "user": status.ssh.user,
            "host_key_fingerprint": status.ssh.host_key_fingerprint,
            "ssh_config": str(status.ssh.ssh_config_path),
            "known_hosts": str(status.ssh.known_hosts_path),
        },
        "adb": None
        if status.adb is None
        else {
            "adb_server": status.adb.adb_server,
            "server_pid": status.adb.server_pid,
            "emulator_pid": status.adb.emulator_pid,
            "adb_path": status.adb.adb_path,
        },
        "devices": devices,
    }


def stop_lab_deployments(
    db_url: str | None, names: list[str], ssh_config: Path | None = None, progress: Progress | None = None
) -> list[str]:
    """Stop every deployment on the lab's virtual devices through the normal stop path (kill the
    process groups, verify them gone on the device, release memory), then check the lab host too:
    virtual devices run their processes here, so a recorded pid still alive is a leak. Raises when
    anything of theirs remains, before the servers are stopped (so ``edgelab stop`` can still
    reach them). Returns the run ids stopped."""
    from sqlmodel import select

    from edgelab.deploy import options, supervise
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.deployments import (
        ACTIVE_STATES,
        GONE_PROCESS_STATES,
        Deployment,
        DeploymentState,
        processes,
    )
    from edgelab.store.devices import get_device

    say = progress or (lambda _msg: None)
    engine = get_engine(db_url)
    with session_scope(engine, write=False) as s:
        deps = [
            d
            for d in s.exec(select(Deployment).where(Deployment.device_name.in_(names))).all()
            if d.state in ACTIVE_STATES
            or (
                d.state == DeploymentState.DEVICE_LOST
                and any(p.pid and p.state not in GONE_PROCESS_STATES for p in processes(s, d.id))
            )
        ]
        virtual = {n for n in names if _is_virtual(s, get_device, n)}
        deps = [d for d in deps if d.device_name in virtual]  # a real device of the same name: not ours
        pids = {d.run_id: [p.pid for p in processes(s, d.id) if p.pid] for d in deps}
    if not deps:
        return []
    say(f"stopping {len(deps)} deployment(s) on the lab's devices")
    opts = options.Options(transport={"ssh_config": str(ssh_config)} if ssh_config else {})
    problems, stopped = [], []
    for d in deps:
        try:
            supervise.stop(engine, d.run_id, opts=opts)
            stopped.append(d.run_id)
        except EdgelabError as err:
            problems.append(f"{d.run_id} on {d.device_name}: {err}")
    for run_id, run_pids in pids.items():
        left = [p for p in run_pids if _alive_on_host(p)]
        if left and run_id in stopped:
            problems.append(f"{run_id}: process group(s) {left} still alive on the lab host")
    if problems:
        raise LabDeploymentsLeft(
            "the lab's devices did not let these deployments stop: " + "; ".join(problems),
            [r for r in pids if r not in stopped],
            remedy="`edgelab sim down` ends them with the lab; `edgelab stop RUN` to stop one by itself",
        )
    say(f"stopped {', '.join(stopped)}; nothing of theirs remains")
    return stopped


def _is_virtual(session, get_device, name: str) -> bool:
    try:
        return bool(get_device(session, name).virtual)
    except NotFound:
        return False


def _alive_on_host(pid: int) -> bool:
    """Any live member of process group ``pid`` on this host (virtual devices run here)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[2] == str(pid) and fields[0] != "Z":
            return True
    return False
