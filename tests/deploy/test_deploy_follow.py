# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""A deployment's events reach the store live: a follower tails the device log into the Ingestor,
one follower per run (lease), a killed follower is resumed from its byte offset without losing or
duplicating an event, and stopping the deployment ends the follower with the final summary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from typer.testing import CliRunner

from deploy.test_deploy_helpers import alive_on_host, cli_env, deploy_lab  # noqa: F401 - fixture
from edgelab.cli import app
from edgelab.deploy import control, follow, launch
from edgelab.deploy.planning import DeployRequest
from edgelab.metrics.ingest import finalize
from edgelab.store.db import session_scope
from edgelab.store.runs import get_run, get_summary, samples_of

runner = CliRunner()


def _wait(pred, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _audio(engine, run_id):
    with session_scope(engine, write=False) as s:
        return samples_of(s, run_id, kind="audio")


def _chunk_lines(engine, run_id) -> list[tuple[str, int]]:
    """(request, idx) of every audio.chunk the device process wrote (its kept stdout log)."""
    out = []
    for line in control.log_lines(engine, run_id):
        d = json.loads(line)
        if d["kind"] == "audio.chunk":
            out.append((d["request"], d["idx"]))
    return out


def test_follower_ingests_a_live_deployment_and_ends_with_it(deploy_lab, ssh_lab):
    url, engine, opts = deploy_lab
    dep = launch.deploy(engine, DeployRequest("s25", "qwen3-tts"), opts=opts)
    th = None
    try:
        th = follow.ensure_follower(engine, dep.run_id, transport=opts.transport)
        assert th is not None
        assert follow.ensure_follower(engine, dep.run_id, transport=opts.transport) is None  # one per run
        _wait(lambda: len(_audio(engine, dep.run_id)) >= 3, "live audio samples")
        with session_scope(engine, write=False) as s:
            live = get_summary(s, dep.run_id, "live")
            assert get_run(s, dep.run_id).meta["follower"]["offset"] > 0
        assert live is not None and live.metrics["audio"]["ttfa_ms"]["count"] >= 1
        shown = runner.invoke(app, ["--db", url, "watch", dep.run_id, "--once"], env=cli_env(url, ssh_lab))
        assert shown.exit_code == 0 and "TTFA" in shown.stdout and "p50" in shown.stdout, shown.output
    finally:
        control.stop(engine, dep.run_id, opts=opts)
    th.join(60)
    assert not th.is_alive() and th.exc is None, th.exc
    with session_scope(engine, write=False) as s:
        final = get_summary(s, dep.run_id, "final")
        run = get_run(s, dep.run_id)
    assert run.state == "stopped" and run.meta["follower"]["done"] is True
    assert final.metrics["live_equals_final"] is True
    assert {k: v for k, v in final.metrics.items() if k != "live_equals_final"} == finalize(
        engine, dep.run_id
    )
    stored = [(x.request, x.idx) for x in _audio(engine, dep.run_id)]
    assert stored == _chunk_lines(engine, dep.run_id)  # every chunk the device wrote, once, in order


def test_a_killed_follower_is_resumed_from_its_offset_without_loss_or_duplicates(deploy_lab, ssh_lab):
    url, engine, opts = deploy_lab
    dep = launch.deploy(engine, DeployRequest("s25", "qwen3-tts"), opts=opts)
    env = {**cli_env(url, ssh_lab), "EDGELAB_DB": url}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edgelab.deploy.follow",
            dep.run_id,
            "--lease-s",
            "2",
            "--ssh-config",
            str(ssh_lab.ssh_config_path),
        ],
        env=env,
        start_new_session=True,
    )
    th = None
    try:
        _wait(lambda: len(_audio(engine, dep.run_id)) >= 2, "samples from the first follower")
        os.kill(proc.pid, signal.SIGKILL)  # a crash: no hand-over, the lease just stops beating
        proc.wait(30)
        held = follow.lease_of(engine, dep.run_id)
        assert held["offset"] > 0 and not held.get("done")
        th = _wait(
            lambda: follow.ensure_follower(engine, dep.run_id, transport=opts.transport, lease_s=2),
            "the lease to expire",
        )
        n = len(_audio(engine, dep.run_id))
        _wait(lambda: len(_audio(engine, dep.run_id)) >= n + 2, "samples from the second follower")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        control.stop(engine, dep.run_id, opts=opts)
    th.join(60)
    assert not th.is_alive() and th.exc is None, th.exc
    stored = [(x.request, x.idx) for x in _audio(engine, dep.run_id)]
    assert stored == _chunk_lines(engine, dep.run_id)
    with session_scope(engine, write=False) as s:
        final = get_summary(s, dep.run_id, "final")
    assert final.metrics["live_equals_final"] is True  # the replayed aggregate matches the stored rows


def test_deploy_cli_starts_a_detached_follower_that_ends_with_the_run(deploy_lab, ssh_lab):
    url, engine, opts = deploy_lab
    res = runner.invoke(
        app, ["--db", url, "deploy", "internvla-a1", "--device", "s25", "--json"], env=cli_env(url, ssh_lab)
    )
    assert res.exit_code == 0, res.output
    run_id = json.loads(res.stdout)["run"]
    try:
        pid = _wait(lambda: follow.lease_of(engine, run_id).get("pid"), "the follower's lease")

        def actions():
            with session_scope(engine, write=False) as s:
                return samples_of(s, run_id, kind="action")

        _wait(actions, "action samples")
    finally:
        control.stop(engine, run_id, opts=opts)
    _wait(lambda: not alive_on_host(pid), "the follower to end")
    with session_scope(engine, write=False) as s:
        final = get_summary(s, run_id, "final")
        run = get_run(s, run_id)
    assert run.meta["control_period_s"] == 0.1 and final.metrics["action"]["chunks"] >= 1
    assert final.metrics["action"]["deadline_misses"] is not None


def test_a_heartbeat_try_is_bounded_by_the_follower_and_what_comes_late_is_handed_to_late():
    """One transport call may chain waits past its own timeout (a reconnect, TERM then KILL of a
    command the freeze caught): the follower's bound calls the device silent, and a connection
    that opens after it gave up is handed to ``late`` (closed there), never leaked."""
    import threading

    import pytest

    from edgelab.deploy.follow.heartbeat import within
    from edgelab.errors import TransportError

    assert within(5.0, lambda: 42) == 42
    with pytest.raises(ValueError):
        within(5.0, lambda: int("not a number"))
    gate, late = threading.Event(), []

    def slow():
        gate.wait(30)
        return "opened after the caller gave up"

    with pytest.raises(TransportError, match="did not answer within 0.2 s"):
        within(0.2, slow, late=late.append)
    gate.set()
    _wait(lambda: late == ["opened after the caller gave up"], "the late value handed over", 10)
