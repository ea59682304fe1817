# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""The follower as a service (edgelab.deploy.supervise.FollowerService) on the virtual lab: start,
is_alive and stop in its THREAD and DETACHED modes, one follower per run whoever asks; a detached
follower writes its own log file (secrets masked); a deploy from the TUI is followed by a detached
follower and one from a playbook by a thread of the play, each read to its end by the stop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from typer.testing import CliRunner

from deploy.test_deploy_helpers import alive_on_host, cli_env, deploy_lab  # noqa: F401 - fixture
from edgelab.cli import app
from edgelab.deploy import control, launch, supervise
from edgelab.deploy.follow import lease_of, log_path
from edgelab.deploy.planning import DeployRequest
from edgelab.deploy.supervise import Follow, FollowerService
from edgelab.store.db import session_scope
from edgelab.store.runs import get_summary, samples_of, telemetry_of

runner = CliRunner()


def _wait(pred, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _stored_chunks(engine, run_id) -> list[tuple[str, int]]:
    with session_scope(engine, write=False) as s:
        return [(x.request, x.idx) for x in samples_of(s, run_id, kind="audio")]


def _device_chunks(engine, run_id) -> list[tuple[str, int]]:
    """(request, idx) of every audio.chunk the device process wrote (its kept stdout log)."""
    out = []
    for line in control.log_lines(engine, run_id):
        d = json.loads(line)
        if d["kind"] == "audio.chunk":
            out.append((d["request"], d["idx"]))
    return out


def _read_to_the_end(engine, run_id) -> None:
    """The stop stored what the device wrote, once each, and closed the run."""
    held = lease_of(engine, run_id)
    assert held.get("done"), held
    assert _stored_chunks(engine, run_id) == _device_chunks(engine, run_id)
    with session_scope(engine, write=False) as s:
        assert get_summary(s, run_id, "final").metrics["audio"]["ttfa_ms"]["count"] >= 1


def test_a_thread_service_starts_once_per_run_is_alive_and_hands_over_on_stop(deploy_lab):
    _url, engine, opts = deploy_lab
    dep = launch.deploy(engine, DeployRequest("s25", "qwen3-tts"), opts=opts)
    run = dep.run_id
    first = FollowerService(engine, run, Follow.THREAD, transport=opts.transport)
    second = FollowerService(engine, run, Follow.THREAD, transport=opts.transport, lease_s=2)
    try:
        assert not first.is_alive()  # nobody follows it yet
        assert first.start() and first.thread is not None and first.is_alive()
        other = FollowerService(engine, run, Follow.THREAD, transport=opts.transport)
        assert not other.start() and other.thread is None and other.is_alive()  # one per run: the lease
        _wait(lambda: len(_stored_chunks(engine, run)) >= 2, "samples from the first follower")
        first.stop()
        assert not first.thread.is_alive() and first.thread.exc is None
        held = lease_of(engine, run)
        assert held["offset"] > 0 and not held.get("done")  # handed over: the offset stored, not the end
        n = len(_stored_chunks(engine, run))
        assert _wait(second.start, "the handed-over lease to expire")  # resumes from the offset
        _wait(lambda: len(_stored_chunks(engine, run)) >= n + 2, "samples from the second follower")
    finally:
        supervise.stop(engine, run, opts=opts)  # the live thread reads the end; not waited for as a process
    assert second.wait(30) and second.thread is not None and second.thread.exc is None
    _read_to_the_end(engine, run)


def test_a_detached_service_logs_to_its_own_file_and_stops_only_its_own_process(
    deploy_lab, ssh_lab, monkeypatch, tmp_path
):
    url, engine, opts = deploy_lab
    monkeypatch.setenv("EDGELAB_SIM_DIR", cli_env(url, ssh_lab)["EDGELAB_SIM_DIR"])  # the lab's ssh_config
    monkeypatch.setenv("EDGELAB_HOME", str(tmp_path / "home"))
    dep = launch.deploy(engine, DeployRequest("s25", "qwen3-tts"), opts=opts)
    run = dep.run_id
    svc = FollowerService(engine, run, Follow.DETACHED)
    try:
        assert svc.start() and svc.pid is not None and svc.pid != os.getpid()
        assert svc.log_path == log_path(run) == tmp_path / "home" / "logs" / f"follow-{run}.log"
        _wait(lambda: lease_of(engine, run).get("pid") == svc.pid, "the detached follower's lease")
        assert svc.is_alive() and alive_on_host(svc.pid)
        assert not FollowerService(engine, run, Follow.DETACHED).start()  # followed: none spawned
        _wait(lambda: len(_stored_chunks(engine, run)) >= 2, "samples from the detached follower")
        svc.stop()
        assert not alive_on_host(svc.pid)
        held = lease_of(engine, run)
        assert held["offset"] > 0 and not held.get("done")  # SIGTERM: handed over, not killed mid-write
        text = svc.log_path.read_text()
        assert f"run {run}: following (pid {svc.pid})" in text, text
        assert f"follow {run}: connected in" in text and f"run {run}: follower ended (handed over)" in text, (
            text
        )
    finally:
        supervise.stop(engine, run, opts=opts)  # the follower is gone: the drain reads the rest here
    _read_to_the_end(engine, run)


def test_a_detached_followers_log_file_has_its_errors_and_no_secret(tmp_path):
    """The planted database password (the follower's URL comes in EDGELAB_DB) never reaches the file."""
    secret = "s3cret-Pw"
    log_file = tmp_path / "follow-r1.log"
    env = {k: v for k, v in os.environ.items() if k != "EDGELAB_LOG"} | {
        "EDGELAB_DB": f"postgresql+psycopg://lab:{secret}@127.0.0.1:1/edgelab",  # refused at once
        "EDGELAB_LOG": "debug",
    }
    res = subprocess.run(
        [sys.executable, "-m", "edgelab.deploy.follow", "r1", "--log-file", str(log_file)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    text = log_file.read_text()
    assert res.returncode == 1 and res.stderr == "", res.stderr
    assert (
        " DEBUG edgelab.store.db: opening database postgresql+psycopg://lab:***@127.0.0.1:1/edgelab\n" in text
    )
    assert " ERROR edgelab.deploy.follow.process: error: " in text, text
    assert secret not in text


def test_a_deploy_from_the_tui_is_followed_detached_and_its_stop_reads_the_end(
    deploy_lab, ssh_lab, monkeypatch, tmp_path
):
    from edgelab.tui import deployview

    url, engine, _opts = deploy_lab
    monkeypatch.setenv("EDGELAB_SIM_DIR", cli_env(url, ssh_lab)["EDGELAB_SIM_DIR"])
    monkeypatch.setenv("EDGELAB_HOME", str(tmp_path / "home"))
    run = deployview.launch(engine, "s25", "qwen3-tts")
    try:
        pid = _wait(lambda: lease_of(engine, run).get("pid"), "the follower's lease")
        assert pid != os.getpid() and alive_on_host(pid)  # a process of its own: it outlives the TUI
        _wait(lambda: len(_stored_chunks(engine, run)) >= 2, "samples with no screen open")
        assert log_path(run).exists()
    finally:
        state = deployview.stop(engine, run)
    assert state == "stopped"
    _read_to_the_end(engine, run)
    _wait(lambda: not alive_on_host(pid), "the follower to end with the run")


def test_a_deploy_step_of_a_playbook_is_followed_by_a_thread_of_the_play(deploy_lab, ssh_lab, tmp_path):
    url, engine, _opts = deploy_lab
    book = tmp_path / "followed.yaml"
    book.write_text(
        "name: followed\ndevices: [s25]\nsteps:\n"
        "  - deploy: {pipeline: qwen3-tts}\n"
        "  - soak: {minutes: 0.05, interval_s: 1}\n"
        "cleanup:\n  - stop: {}\n"
    )
    env = cli_env(url, ssh_lab) | {"EDGELAB_HOME": str(tmp_path / "home")}
    res = runner.invoke(app, ["--db", url, "play", str(book), "--json"], env=env)
    assert res.exit_code == 0, res.output
    (job,) = json.loads(res.stdout)["jobs"]
    assert [s["status"] for s in job["steps"]] == ["passed"] * 3, job["steps"]
    (run,) = job["runs"]
    held = lease_of(engine, run)
    assert held["pid"] == os.getpid()  # the play's own process: nothing of the play outlives it
    with session_scope(engine, write=False) as s:  # followed while it ran, not only drained at its stop
        sampled = [x.source for x in telemetry_of(s, run_id=run) if x.source != "playbook-soak"]
    assert sampled, "no telemetry beside a follower while the play ran"
    assert not (tmp_path / "home" / "logs").exists()  # a thread logs with the play, not to a file of its own
    _read_to_the_end(engine, run)  # the play's stop waited for its follower to store the end
