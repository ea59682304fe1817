"""Nothing outlives its reason: devices killed mid-run, then ``sim down`` from another database.

A private virtual lab (``sim up``) runs the reference TTS on s25 (ADB) and orin-agx (SSH), each
with its detached follower and the follower's telemetry sampler on the device. Then the ADB
emulator and every sshd of the lab (the listener and the sessions) are killed with SIGKILL. The
samplers those devices ran must end on their own (their reader is gone: SIGPIPE, or the
parent-death check), the lab comes back (``sim up``), ``stop`` ends both runs, and ``sim down``,
run with a database that never heard of these runs, ends every process the lab started and leaves
no process in a persona's mount namespace. Processes are counted on the lab host, where virtual
devices run theirs, before and after.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deploy.test_deploy_helpers import alive_on_host

from edgelab.metrics.telemetry import BLOCK_MARK
from edgelab.sim.adb_lab import free_port as adb_free_port
from edgelab.sim.sshd import free_port
from edgelab.store import db as dbmod

pytestmark = [pytest.mark.ssh, pytest.mark.adb, pytest.mark.slow]
CLI = [sys.executable, "-c", "from edgelab.cli import main; main()"]
# the operator's own variables name the lab too: a command run with them is not the lab's
OPERATOR_VARS = (b"EDGELAB_SIM_DIR=", b"EDGELAB_HOME=", b"EDGELAB_DB=", b"PWD=", b"OLDPWD=")


def edgelab(env, *args, timeout=300):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=timeout)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def lab_processes(sim: Path) -> dict[int, str]:
    """pid -> command line of every process on this host that belongs to the lab at ``sim``: its
    environment names the lab's directories, or its mount namespace is made of them."""
    mark = str(sim).encode()
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        env = [v for v in _read(f"/proc/{entry}/environ").split(b"\0") if not v.startswith(OPERATOR_VARS)]
        if any(mark in v for v in env) or mark in _read(f"/proc/{entry}/mountinfo"):
            cmd = _read(f"/proc/{entry}/cmdline").replace(b"\0", b" ").decode(errors="replace")
            if cmd and alive_on_host(int(entry)):
                out[int(entry)] = cmd[:160]
    return out


def followers(runs) -> dict[int, str]:
    """The lab-side followers of ``runs`` (``python -m edgelab.deploy.follow RUN``)."""
    out = {}
    for entry in os.listdir("/proc"):
        cmd = _read(f"/proc/{entry}/cmdline").split(b"\0") if entry.isdigit() else []
        if b"edgelab.deploy.follow" in cmd and any(r.encode() in cmd for r in runs):
            if alive_on_host(int(entry)):
                out[int(entry)] = b" ".join(cmd).decode()
    return out


def samplers(sim: Path) -> dict[int, str]:
    return {p: c for p, c in lab_processes(sim).items() if BLOCK_MARK in c or "tegrastats" in c}


def _wait(pred, timeout: float, step: float = 0.25) -> bool:
    end = time.monotonic() + timeout  # a hang guard, not a figure
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


def _kill(pids) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _sshd_pids(status: dict) -> list[int]:
    """This lab's sshd (its listener, by the pid ``sim up`` reported) and its sessions (the
    listener's descendants): never another lab's, whose processes look the same."""
    from edgelab.sim.sshd import _descendants

    pid = status["ssh"]["pid"]
    return [pid, *_descendants(pid)]


def test_killed_devices_leave_no_sampler_and_sim_down_leaves_nothing(tmp_path, fault_figures):
    sim = tmp_path / "sim"
    env = {
        **os.environ,
        "EDGELAB_HOME": str(tmp_path / "home"),
        "EDGELAB_DB": str(tmp_path / "lab.db"),
        "EDGELAB_SIM_DIR": str(sim),
    }
    ports = [
        "--ssh-port",
        str(free_port(["127.0.0.11", "127.0.0.16"])),
        "--adb-port",
        str(adb_free_port(None)),
    ]
    failures: list[str] = []
    before = after_kill = after_down = {}
    leaks = 0
    try:
        up = edgelab(env, "sim", "up", *ports, "--json")
        assert up.returncode == 0, up.stderr
        status = json.loads(up.stdout)
        assert edgelab(env, "probe", "s25", "orin-agx").returncode == 0
        baseline = set(lab_processes(sim))  # the lab's own servers and nothing else
        runs = {}
        for device in ("s25", "orin-agx"):
            res = edgelab(env, "deploy", "qwen3-tts", "--device", device, "--json")
            assert res.returncode == 0, res.stderr
            runs[device] = json.loads(res.stdout)["run"]
        # each run's follower has its sampler running on the device
        assert _wait(lambda: len(samplers(sim)) >= 2, 60), samplers(sim)
        before = lab_processes(sim)
        emulator = status["adb"]["emulator_pid"]
        _kill([emulator, *_sshd_pids(status)])
        # the killed devices' samplers see their reader gone and end (SIGPIPE / parent gone)
        if not _wait(lambda: not samplers(sim), 30):
            failures.append(f"samplers outlived their devices: {samplers(sim)}")
        after_kill = lab_processes(sim)
        # the lab comes back; stop ends both runs (their workloads still ran on the lab host)
        up = edgelab(env, "sim", "up", *ports)
        assert up.returncode == 0, up.stderr
        for device, run in runs.items():
            res = edgelab(env, "stop", run, "--json")
            if res.returncode != 0:
                failures.append(f"stop {run} ({device}): {res.stderr[-400:]}")
        # a run left running, then sim down from a database that never recorded it: it ends too
        res = edgelab(env, "deploy", "qwen3-tts", "--device", "s25", "--json")
        assert res.returncode == 0, res.stderr
        runs["s25 again"] = json.loads(res.stdout)["run"]
        assert _wait(lambda: len(samplers(sim)) >= 1, 60), samplers(sim)
        other = {**env, "EDGELAB_DB": str(tmp_path / "other.db")}
        down = edgelab(other, "sim", "down")
        if down.returncode != 0:
            failures.append(f"sim down (other database): {down.stderr[-400:]}")
        after_down = lab_processes(sim)
        # and once more: the lab up, a run, its devices killed, sim down from the run's own database:
        # the run cannot be stopped through its device, ends with the lab and is recorded stopped
        up = edgelab(env, "sim", "up", *ports, "--json")
        assert up.returncode == 0, up.stderr
        res = edgelab(env, "deploy", "qwen3-tts", "--device", "orin-agx", "--json")
        assert res.returncode == 0, res.stderr
        last = runs["orin-agx again"] = json.loads(res.stdout)["run"]
        status = json.loads(up.stdout)
        _kill([status["adb"]["emulator_pid"], *_sshd_pids(status)])
        down = edgelab(env, "sim", "down")
        if down.returncode != 0:
            failures.append(f"sim down (killed devices): {down.stderr[-400:]}")
        after_down = {**after_down, **lab_processes(sim)}
        shown = json.loads(edgelab(env, "runs", "show", last, "--json").stdout)
        if shown["state"] != "stopped":
            failures.append(f"{last} is {shown['state']} after sim down, not stopped: {down.stderr[-800:]}")
        ps = json.loads(edgelab(env, "ps", "--all", "--json").stdout)
        leaks += sum(1 for d in ps if d["state"] in ("pending", "starting", "running") or d.get("to_stop"))
        leaks += sum(str(sim) in line for line in Path("/proc/self/mountinfo").read_text().splitlines())
        # their followers see the runs end (or their devices gone for good) and end too
        if not _wait(lambda: not followers(runs.values()), 90):
            after_down = {**after_down, **followers(runs.values())}
    finally:
        edgelab(env, "sim", "down")
        _kill(lab_processes(sim))
        dbmod.dispose_engines()
    orphans = len(after_down)
    fault_figures["killed devices, sim down"].add(
        trials=4, failures=len(failures), orphans=orphans, leaks=leaks
    )
    print(
        f"lab processes: {len(baseline)} lab servers, {len(before)} while running, "
        f"{len(after_kill)} after the kill, {len(after_down)} after sim down"
    )
    assert not failures, (failures, after_down)
    assert orphans == 0 and leaks == 0, after_down
