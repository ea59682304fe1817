"""`edgelab sim down` stops the deployments running on the lab's devices before the servers go.

Through the normal stop path (process groups killed and verified gone on the device, memory
released), and then checked on the lab host itself, where virtual devices run their processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from deploy.test_deploy_helpers import alive_on_host, group_members

from edgelab.sim.sshd import free_port, persona_processes
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.deployments import get_deployment, open_reservations, processes
from edgelab.store.devices import get_device

pytestmark = [pytest.mark.ssh, pytest.mark.adb, pytest.mark.slow]
CLI = [sys.executable, "-c", "from edgelab.cli import main; main()"]


def edgelab(env, *args, timeout=300):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=timeout)


def test_sim_down_stops_every_deployment_and_leaves_nothing_of_theirs(tmp_path, fault_figures):
    sim = tmp_path / "sim"
    db = tmp_path / "lab.db"
    env = {
        **os.environ,
        "EDGELAB_HOME": str(tmp_path / "home"),
        "EDGELAB_DB": str(db),
        "EDGELAB_SIM_DIR": str(sim),
    }
    port = str(free_port(["127.0.0.11", "127.0.0.16"]))
    runs = {}
    try:
        up = edgelab(env, "sim", "up", "--ssh-port", port, "--json")
        assert up.returncode == 0, up.stderr
        assert edgelab(env, "probe", "s25", "orin-agx").returncode == 0
        for device in ("s25", "orin-agx"):
            res = edgelab(env, "deploy", "qwen3-tts", "--device", device, "--json")
            assert res.returncode == 0, res.stderr
            runs[device] = json.loads(res.stdout)["run"]
        engine = get_engine(str(db))
        with session_scope(engine, write=False) as s:
            pids = {d: [p.pid for p in processes(s, get_deployment(s, r).id)] for d, r in runs.items()}
        assert all(alive_on_host(p) for ps in pids.values() for p in ps)

        down = edgelab(env, "sim", "down")
        assert down.returncode == 0, down.stderr
        assert "stopping 2 deployment(s)" in down.stderr and "nothing of theirs remains" in down.stderr
        dbmod.dispose_engines()
        engine = get_engine(str(db))
        with session_scope(engine, write=False) as s:
            for device, run in runs.items():
                assert get_deployment(s, run).state == "stopped"
                assert open_reservations(s, get_device(s, device).id) == []
        orphans = sum(alive_on_host(p) + len(group_members(p)) for ps in pids.values() for p in ps)
        orphans += len(persona_processes(sim))
        fault_figures["sim down with deployments"].add(trials=len(runs), failures=0, orphans=orphans)
        assert orphans == 0
    finally:
        if edgelab(env, "sim", "down").returncode != 0:  # refused (something left): stop the servers anyway
            from edgelab.sim.adb_lab import stop_adb_lab
            from edgelab.sim.sshd import stop_ssh_lab

            stop_ssh_lab(sim)
            stop_adb_lab(sim)
        dbmod.dispose_engines()
