"""Follower supervision's decisions, on a real database and real processes (no device needed):
who follows a run, when a new follower is started, and when none is.

The replacement itself, with real followers on the virtual lab, is tests/faults/test_faults_follower.py.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from sqlmodel import select

from edgelab.deploy import owner, supervise
from edgelab.store.db import get_engine, session_scope
from edgelab.store.deployments import Deployment
from edgelab.store.devices import add_device
from edgelab.store.models import Device
from edgelab.store.runs import create_run, get_run


@pytest.fixture
def lab(dbpath):
    engine = get_engine(str(dbpath))
    with session_scope(engine) as s:
        dev = add_device(s, Device(name="box", transport="ssh", ssh_host="10.0.0.9"))
        s.flush()
        for rid in ("r-live", "r-dead", "r-none", "r-quiet"):
            create_run(s, id=rid, pipeline="qwen3-tts", device_name="box", kind="deploy", state="running")
            s.flush()
            s.add(
                Deployment(
                    run_id=rid,
                    device_id=dev.pk,
                    device_name="box",
                    pipeline="qwen3-tts",
                    strategy="S3",
                    runtime="reference",
                    state="running",
                )
            )
    procs: list[subprocess.Popen] = []

    def sleeper() -> int:
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        procs.append(p)
        return p.pid

    yield engine, sleeper, procs
    for p in procs:
        p.kill()
        p.wait()


def _lease(engine, run_id: str, **f) -> None:
    with session_scope(engine) as s:
        run = get_run(s, run_id)
        run.meta = {**run.meta, "follower": f}
        s.add(run)


def _me(pid: int) -> dict:
    return {"pid": pid, "host": owner.me()["owner_host"], "start": owner.start_of(pid)}


def test_a_dead_or_silent_follower_is_replaced_a_live_one_is_not(lab):
    engine, sleeper, procs = lab
    live = sleeper()
    _lease(engine, "r-live", owner="x", heartbeat=time.time(), offset=10, **_me(live))
    dead = sleeper()
    dead_id = _me(dead)
    procs[-1].kill()
    procs[-1].wait()
    _lease(engine, "r-dead", owner="y", heartbeat=time.time(), offset=10, **dead_id)
    _lease(engine, "r-quiet", owner="z", heartbeat=time.time() - 60, offset=10, pid=1, host="elsewhere")
    assert supervise.status(engine, "r-live").state == "alive"
    assert (
        supervise.status(engine, "r-dead").state == "gone"
        and "is gone" in supervise.status(engine, "r-dead").why
    )
    assert (
        supervise.status(engine, "r-quiet").state == "gone"
        and "silent" in supervise.status(engine, "r-quiet").why
    )
    assert supervise.status(engine, "r-none").state == "none"
    spawned: list[str] = []

    def spawn(run_id: str, env: dict[str, str]) -> int:
        assert env["EDGELAB_DB"].startswith("sqlite:")  # the database by environment, never argv
        spawned.append(run_id)
        return sleeper()

    assert sorted(supervise.supervise(engine, spawn=spawn)) == ["r-dead", "r-none", "r-quiet"]
    # a follower started moments ago that does not hold the lease yet is not started again
    assert supervise.supervise(engine, spawn=spawn) == []
    assert supervise.status(engine, "r-dead").state == "starting"
    assert sorted(spawned) == ["r-dead", "r-none", "r-quiet"]


def test_a_run_deployed_without_a_follower_is_left_so_unless_asked(lab):
    engine, sleeper, _procs = lab
    supervise.unsupervised(engine, "r-none")
    calls: list[str] = []

    def spawn(run_id: str, env: dict[str, str]) -> int:
        calls.append(run_id)
        return sleeper()

    assert "r-none" not in supervise.supervise(engine, spawn=spawn)
    assert supervise.ensure(engine, "r-none", spawn=spawn) is not None  # `watch` asks for it
    assert calls.count("r-none") == 1


def test_nothing_is_started_for_a_run_that_ended(lab):
    engine, sleeper, _procs = lab
    with session_scope(engine) as s:
        dep = s.exec(select(Deployment).where(Deployment.run_id == "r-none")).one()
        dep.state = "stopped"
        s.add(dep)
    assert supervise.ensure(engine, "r-none", spawn=lambda *_: sleeper()) is None
