# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""Real deployments of the reference workload on virtual devices: start, ps, logs, stop, SIGINT.

Virtual devices run their commands as processes on the lab host, so every "gone" below is checked
in the host's process table, not only through the device.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from sqlmodel import select
from typer.testing import CliRunner

from deploy.test_deploy_helpers import alive_on_host, cli_env, deploy_lab, group_members  # noqa: F401 - fixture
from edgelab.cli import app
from edgelab.deploy import control, launch, planning
from edgelab.deploy.planning import DeployRequest
from edgelab.errors import Refusal
from edgelab.store.db import session_scope
from edgelab.store.deployments import Deployment, Reservation, get_deployment, open_reservations, processes
from edgelab.store.devices import get_device
from edgelab.store.runs import get_run

runner = CliRunner()


def _cli(url, ssh_lab, *args):
    return runner.invoke(app, ["--db", url, *args], env=cli_env(url, ssh_lab))


def _pids(engine, run_id):
    with session_scope(engine, write=False) as s:
        return [p.pid for p in processes(s, get_deployment(s, run_id).id)]


def _open(engine, device):
    with session_scope(engine, write=False) as s:
        return open_reservations(s, get_device(s, device).id)


def test_deploy_on_the_phone_shows_in_ps_streams_logs_and_stop_leaves_nothing(deploy_lab, ssh_lab):
    url, engine, _opts = deploy_lab
    res = _cli(url, ssh_lab, "deploy", "qwen3-tts", "--device", "s25", "--json")
    assert res.exit_code == 0, res.output
    dep = json.loads(res.stdout)
    run = dep["run"]
    try:
        assert dep["state"] == "running" and dep["strategy"] == "S3" and dep["runtime"] == "reference"
        assert [p["phase"] for p in dep["phases"]][:3] == ["admitted", "connected", "pushed"]
        assert dep["placement"] and all(
            p["observed"] == "cpu (reference, random weights)" and not p["fallback"]
            for p in dep["placement"]
            if p["planned"] != "server"
        )
        (pid,) = _pids(engine, run)
        assert alive_on_host(pid) and group_members(pid)
        assert len(_open(engine, "s25")) == 1
        with session_scope(engine, write=False) as s:
            assert get_run(s, run).state == "running" and get_run(s, run).kind == "deploy"
        ps = json.loads(_cli(url, ssh_lab, "ps", "--json").stdout)
        assert run in [d["run"] for d in ps if d["state"] == "running"]
        logs = _cli(url, ssh_lab, "logs", run)
        assert logs.exit_code == 0, logs.output
        first = json.loads(logs.stdout.splitlines()[0])
        assert first["kind"] == "run.start" and first["run"] == run and first["device"] == "s25"
        # -f streams: the reference keeps emitting audio chunks while we read.
        seen = []
        for line in control.log_lines(engine, run, follow=True):
            seen.append(json.loads(line)["kind"])
            if seen.count("audio.chunk") >= 2:
                break
        assert "audio.chunk" in seen
    finally:
        stop = _cli(url, ssh_lab, "stop", run, "--json")
    assert stop.exit_code == 0, stop.output
    assert json.loads(stop.stdout)["state"] == "stopped"
    assert not alive_on_host(pid) and group_members(pid) == []
    assert _open(engine, "s25") == []
    with session_scope(engine, write=False) as s:
        assert get_run(s, run).state == "stopped"
        assert any(
            k.endswith("stdout.log") and "run.start" in v for k, v in get_deployment(s, run).logs.items()
        )
    assert "run.start" in _cli(url, ssh_lab, "logs", run).stdout  # kept with the run after the stop
    from edgelab.deploy.follow import lease_of  # the deploy's detached follower ended with the run

    follower = lease_of(engine, run).get("pid")
    deadline = time.monotonic() + 60
    while follower and alive_on_host(follower) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not (follower and alive_on_host(follower))


def test_ssh_jetson_s1_deploy_starts_and_stops(deploy_lab):
    url, engine, opts = deploy_lab
    dep = launch.deploy(engine, DeployRequest("orin-agx", "qwen3-tts-1.7b"), opts=opts)
    try:
        assert dep.state == "running" and dep.strategy == "S1" and dep.runtime == "reference"
        assert dep.remote_dir.endswith(f"/.edgelab/runs/{dep.run_id}")
        (pid,) = _pids(engine, dep.run_id)
        assert alive_on_host(pid)
    finally:
        control.stop(engine, dep.run_id, opts=opts)
    assert not alive_on_host(pid) and group_members(pid) == []
    assert _open(engine, "orin-agx") == []


def test_running_deployments_count_in_admission(deploy_lab):
    url, engine, opts = deploy_lab
    dep = launch.deploy(engine, DeployRequest("rb3g2", "qwen3-tts"), opts=opts)
    try:
        try:
            launch.deploy(engine, DeployRequest("rb3g2", "internvla-a1"), opts=opts)
            raise AssertionError("a VLA was admitted beside a running TTS on a 6 GB board")
        except Refusal as r:
            assert r.code == "budget_exceeds_device" and r.numbers["reserved"] > 0
            assert (
                r.numbers["reserved"] + r.numbers["requested"]
                > r.numbers["capacity"]
                >= r.numbers["requested"]
            )
            assert "stop deployments on rb3g2" in r.remedy
        assert len(_open(engine, "rb3g2")) == 1
    finally:
        control.stop(engine, dep.run_id, opts=opts)
    assert _open(engine, "rb3g2") == []
    second = launch.deploy(engine, DeployRequest("rb3g2", "internvla-a1"), opts=opts)  # fits once freed
    control.stop(engine, second.run_id, opts=opts)
    assert all(not alive_on_host(p) for p in _pids(engine, second.run_id))


def test_a_process_that_dies_before_ready_fails_the_deploy_and_releases(deploy_lab):
    url, engine, opts = deploy_lab
    planned = planning.plan(engine, DeployRequest("s25", "internvla-a1"))
    assert planned.plan.processes[0].argv[3] == "vla"
    # An unknown pipeline kind for the reference is refused before anything is reserved.
    try:
        launch.deploy(engine, DeployRequest("s25", "spark-x2.5"), opts=opts)
        raise AssertionError("a text LM was deployed on the reference runtime")
    except Refusal as r:
        assert r.code == "no_exported_graph"
    assert _open(engine, "s25") == []


HOLD_AFTER_SPAWN = """
import importlib, time
from edgelab.cli import main
shown = importlib.import_module("edgelab.cli.deploy")
real = shown._show_phase
def held(event, json_out):
    real(event, json_out)
    if event.name == "spawned":
        time.sleep(120)  # KeyboardInterrupt lands here, in the CLI drawing the event: thrown into the launch
shown._show_phase = held
main()
"""


def test_sigint_during_deploy_leaves_no_process_and_no_reservation(deploy_lab, ssh_lab):
    url, engine, _opts = deploy_lab
    # The real CLI in a child; the hook only pins the timing: after the real "spawned" phase is printed
    # the deploy waits (at most 120 s) for the SIGINT, so the workload can never become ready first.
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_AFTER_SPAWN, "--db", url, "deploy", "qwen3-tts", "--device", "s25"],
        env=cli_env(url, ssh_lab),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        for line in proc.stderr:
            if line.startswith("spawned"):
                proc.send_signal(signal.SIGINT)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    with session_scope(engine, write=False) as s:
        dep = s.exec(select(Deployment).order_by(Deployment.id.desc())).first()
        assert dep.state == "stopped" and "SIGINT" in (dep.error or "")
        pids = [p.pid for p in processes(s, dep.id)]
        assert all(
            r.released_at for r in s.exec(select(Reservation).where(Reservation.deployment_id == dep.id))
        )
        assert get_run(s, dep.run_id).state == "stopped"
    assert pids
    time.sleep(0.2)
    assert all(not alive_on_host(p) and group_members(p) == [] for p in pids)
    assert _open(engine, "s25") == []
