"""A device frozen under a llama-server deployment that the follower drives from the lab side.

The follower of a llama-server run is busy in an HTTP request through a forwarded port most of
the time; a device that freezes then must still be found by the follower's own heartbeat, not by
the request's timeout. A private lab (one sshd, the Jetson persona) runs the real llama.cpp build
with a random-weight GGUF, deployed by the real CLI with its detached follower; SIGSTOP freezes
the sshd and everything the persona runs (llama-server included). No command looks: the follower
alone marks the run device-lost (memory held, to_stop set); after the thaw ``stop`` kills the
server and only then is the memory released.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime

import pytest
from deploy.test_deploy_helpers import alive_on_host, group_members

from edgelab.artifacts.registry import add_artifact
from edgelab.deploy.follow import LOSS_S
from edgelab.inventory.probe import probe_devices
from edgelab.sim import sshd
from edgelab.sim.lab import LabStatus, register
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.deployments import get_deployment, open_reservations, processes
from edgelab.store.runs import get_run, get_summary
from faults.test_faults_frozen import Freezer

CLI = [sys.executable, "-c", "from edgelab.cli import main; main()"]


@pytest.fixture(scope="module")
def llama_frozen_lab(tmp_path_factory, llama_build):
    """orin-agx on a private sshd, probed, with the llama.cpp build and a 4M random GGUF registered."""
    from edgelab.models.synth import synth_files
    from edgelab.runtimes import load_runtimes
    from edgelab.runtimes.build import register_build

    state = tmp_path_factory.mktemp("frozen-llama-lab")
    home = tmp_path_factory.mktemp("frozen-llama-home")
    ssh_info = None
    runs: list[str] = []
    try:
        ssh_info = sshd.start_ssh_lab(state, ["orin-agx"], port=sshd.free_port(["127.0.0.11"]))
        url = f"sqlite:///{state / 'lab.db'}"
        register(url, LabStatus(state, ssh=ssh_info, adb=None), check=False)
        engine = get_engine(url)
        outcomes = probe_devices(engine, ["orin-agx"], timeout=60, ssh_config=str(ssh_info.ssh_config_path))
        assert all(o.ok for o in outcomes), [o.error for o in outcomes]
        model = synth_files("spark-x2.5-test", "4M", out_dir=tmp_path_factory.mktemp("models"))
        with session_scope(engine) as s:
            register_build(s, load_runtimes()["llama.cpp"], llama_build, prefix="test-llama")
            add_artifact(
                s,
                "spark-x2.5-test",
                [model.path],
                kind="model",
                target="any",
                component="spark-x2.5",
                meta=model.meta,
                replace=True,
            )
        env = {
            **os.environ,
            "EDGELAB_DB": url,
            "EDGELAB_HOME": str(home),
            "EDGELAB_SIM_DIR": str(state),
            "COLUMNS": "300",
        }
        ssh_pid = ssh_info.pid
        freezer = Freezer(lambda: [ssh_pid, *sshd._descendants(ssh_pid), *sshd.persona_processes(state)])
        yield {"engine": engine, "env": env, "freezer": freezer, "runs": runs}
    finally:
        if "freezer" in locals():
            freezer.thaw()
        left = []
        for run in runs:  # whatever a failed test left running is stopped the normal way
            res = subprocess.run([*CLI, "stop", run], env=env, capture_output=True, text=True, timeout=120)
            if res.returncode != 0:
                left.append((run, res.stderr[-300:]))
        dbmod.dispose_engines()
        sshd.stop_ssh_lab(state)
        assert not left, left


def _cli(env, *args, timeout=300):
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _requests_done(engine, run_id) -> int:
    with session_scope(engine, write=False) as s:
        summ = get_summary(s, run_id, "live")
        return int(((summ.metrics if summ else {}).get("text") or {}).get("requests") or 0)


def test_the_follower_driving_llama_server_alone_detects_a_frozen_device_and_memory_waits_for_stop(
    llama_frozen_lab,
):
    lab = llama_frozen_lab
    env, engine, freezer = lab["env"], lab["engine"], lab["freezer"]
    res = _cli(
        env,
        "deploy",
        "spark-x2.5",
        "--device",
        "orin-agx",
        "--runtime",
        "llama.cpp",
        "--lab-host-build",
        "--json",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    run = json.loads(res.stdout)["run"]
    lab["runs"].append(run)
    with session_scope(engine, write=False) as s:
        dep = get_deployment(s, run)
        assert dep.plan["processes"][0]["adapter"] == "llama-server"
        pids = [p.pid for p in processes(s, dep.id) if p.pid]
    deadline = time.monotonic() + 180  # a hang guard: the detached follower is driving requests
    while time.monotonic() < deadline and _requests_done(engine, run) < 2:
        time.sleep(0.3)
    assert _requests_done(engine, run) >= 2, "the follower never drove llama-server"
    frozen_at = time.time()
    freezer.freeze()
    try:
        deadline = time.monotonic() + 120  # a hang guard, not a figure
        while time.monotonic() < deadline:
            with session_scope(engine, write=False) as s:
                if get_deployment(s, run).state != "running":
                    break
            time.sleep(0.2)
    finally:
        freezer.thaw()
    with session_scope(engine, write=False) as s:
        dep = get_deployment(s, run)
        held = [x for x in open_reservations(s, dep.device_id) if x.deployment_id == dep.id]
        lost = [p for p in dep.phases if p["phase"] == "device-lost"]
    assert dep.state == "device-lost" and lost and lost[-1].get("by") == "follower", (dep.state, dep.phases)
    took = datetime.fromisoformat(lost[-1]["t"]).timestamp() - frozen_at
    print(
        f"follower driving llama-server on orin-agx: device-lost {took:.1f} s after the freeze "
        f"(budget {LOSS_S:g} s of silence)"
    )
    assert dep.to_stop and held, (dep.to_stop, held)  # lost, not proven gone: memory kept
    assert any(alive_on_host(p) for p in pids)  # the server still runs there
    deadline = time.monotonic() + 60  # the follower closes the run's summary and ends (a hang guard)
    while time.monotonic() < deadline:
        with session_scope(engine, write=False) as s:
            follower = get_run(s, run).meta.get("follower") or {}
        if follower.get("done"):
            break
        time.sleep(0.3)
    assert follower.get("done"), follower
    with session_scope(engine, write=False) as s:  # nobody released it meanwhile
        dep = get_deployment(s, run)
        assert dep.state == "device-lost" and dep.to_stop
        assert [x for x in open_reservations(s, dep.device_id) if x.deployment_id == dep.id]
    res = _cli(env, "stop", run, "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["state"] == "stopped"
    with session_scope(engine, write=False) as s:  # seen gone: only now released
        dep = get_deployment(s, run)
        assert not dep.to_stop and not [
            x for x in open_reservations(s, dep.device_id) if x.deployment_id == dep.id
        ]
    assert all(not alive_on_host(p) and group_members(p) == [] for p in pids)
