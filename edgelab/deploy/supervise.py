"""Follower supervision: every running deployment is followed, and a follower that dies is replaced.

A follower (:mod:`edgelab.deploy.follow`) records who it is in its lease (``run.meta["follower"]``:
pid, host and start time, heartbeat, byte offset). Nothing keeps a detached process alive, so the
commands that look at runs check it: ``ps``, ``watch``, ``deploy`` (:func:`supervise`) find a run
whose follower is gone (proven dead on this host, or silent past its lease anywhere) and start a
new one, which resumes from the stored offset of the device's log. ``stop`` ends a run and then
:func:`drain` reads the device's log to its end, through the live follower or in place of a dead
one, so every chunk the device wrote is stored before ``stop`` returns.

The interface is four functions of (engine, run id); what a follower is stays in ``follow``:

- :func:`status` -> ``Followed``: who follows the run, and whether that one is alive;
- :func:`ensure` starts a detached follower where none is alive (returns its pid, or None);
- :func:`supervise` does it for every running deployment (returns the run ids given one);
- :func:`drain` after a stop: the device's log read to its end, the run's final summary written;
  :func:`stop` is ``control.stop`` then :func:`drain`, what every stop command calls.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from sqlmodel import col, select

from edgelab.deploy import control, owner
from edgelab.deploy.follow import LEASE_S, Follower, spawn_detached
from edgelab.deploy.options import Options
from edgelab.errors import EdgelabError
from edgelab.lease.owner import Holder
from edgelab.store.db import session_scope
from edgelab.store.deployments import ACTIVE_STATES, Deployment, DeploymentState
from edgelab.store.runs import get_run

SPAWN_GRACE_S = 30.0  # a follower started this recently may not hold its lease yet: not started again
DRAIN_WAIT_S = 20.0  # how long stop waits for a live follower's last read before reading itself


@dataclass(frozen=True)
class Followed:
    """Who follows a run: ``state`` is ``alive``, ``gone`` (proven dead or silent past its lease),
    ``starting`` (spawned moments ago), ``none`` (never followed) or ``done`` (it read the end)."""

    state: str
    pid: int | None = None
    host: str | None = None
    why: str = ""


def _lease(engine: Engine, run_id: str) -> tuple[str, dict[str, Any]]:
    with session_scope(engine, write=False) as s:
        run = get_run(s, run_id)
        return run.id, dict(run.meta.get("follower") or {})


def status(engine: Engine, run_id: str, *, lease_s: float = LEASE_S) -> Followed:
    """Whether the run's follower lives (see :class:`Followed`)."""
    _rid, f = _lease(engine, run_id)
    if f.get("done"):
        return Followed("done", f.get("pid"), f.get("host"))
    spawned = f.get("spawned") or {}
    if spawned and time.time() - float(spawned.get("t", 0)) < SPAWN_GRACE_S:
        if not owner.gone(spawned.get("pid"), spawned.get("host"), spawned.get("start")):
            if spawned.get("pid") != f.get("pid"):  # not yet holding the lease: let it start
                return Followed("starting", spawned.get("pid"), spawned.get("host"))
    if not f.get("owner"):
        return Followed("none", why="never followed")
    pid, host = f.get("pid"), f.get("host")
    if owner.gone(pid, host, f.get("start")):
        return Followed("gone", pid, host, f"follower pid {pid} on {host} is gone")
    age = time.time() - float(f.get("heartbeat", 0))
    if age >= lease_s:
        return Followed("gone", pid, host, f"follower silent for {age:.0f} s (lease {lease_s:g} s)")
    return Followed("alive", pid, host)


def _db_env(engine: Engine) -> dict[str, str]:
    """The follower's environment: the database by URL (never on its command line)."""
    return {**os.environ, "EDGELAB_DB": engine.url.render_as_string(hide_password=False)}


def ensure(
    engine: Engine,
    run_id: str,
    *,
    spawn: Callable[[str, dict[str, str]], int] = spawn_detached,
    lease_s: float = LEASE_S,
    asked: bool = True,
) -> int | None:
    """A detached follower for ``run_id`` unless a live one follows it; returns the new pid (None:
    not needed: followed, ended, not a running deployment). ``asked`` False (a supervising look,
    not the operator asking for this run): a run deployed ``--no-follow`` is left unfollowed."""
    rid, f = _lease(engine, run_id)
    if not asked and f.get("supervised") is False:
        return None
    with session_scope(engine, write=False) as s:
        dep = s.exec(select(Deployment).where(Deployment.run_id == rid)).first()
    if dep is None or dep.state not in ACTIVE_STATES or dep.state == DeploymentState.PENDING:
        return None
    if status(engine, rid, lease_s=lease_s).state in ("alive", "starting", "done"):
        return None
    pid = spawn(rid, _db_env(engine))
    _note_spawned(engine, rid, pid)
    return pid


def unsupervised(engine: Engine, run_id: str) -> None:
    """The operator deployed without a follower (``--no-follow``): supervision leaves it so."""
    with session_scope(engine) as s:
        run = get_run(s, run_id)
        run.meta = {**run.meta, "follower": {**(run.meta.get("follower") or {}), "supervised": False}}
        s.add(run)


def _note_spawned(engine: Engine, run_id: str, pid: int) -> None:
    """Written beside the lease (never over it): the next look waits for this one to start."""
    with session_scope(engine) as s:
        run = get_run(s, run_id)
        f = dict(run.meta.get("follower") or {})
        f["spawned"] = {
            "pid": pid,
            "host": socket.gethostname()[:255],
            "start": owner.start_of(pid),
            "t": time.time(),
        }
        run.meta = {**run.meta, "follower": f}
        s.add(run)


def supervise(
    engine: Engine,
    *,
    device: str | None = None,
    spawn: Callable[[str, dict[str, str]], int] = spawn_detached,
) -> list[str]:
    """:func:`ensure` for every running deployment (of ``device``); returns the runs given a follower."""
    with session_scope(engine, write=False) as s:
        q = select(Deployment.run_id).where(col(Deployment.state) == DeploymentState.RUNNING)
        if device:
            q = q.where(Deployment.device_name == device)
        runs = list(s.exec(q).all())
    started = []
    for run_id in runs:
        try:
            if ensure(engine, run_id, spawn=spawn, asked=False) is not None:
                started.append(run_id)
        except OSError:
            continue  # no process could be started here: the next look tries again
    return started


def drain(
    engine: Engine,
    run_id: str,
    *,
    transport: dict[str, Any] | None = None,
    wait_s: float = DRAIN_WAIT_S,
) -> dict[str, Any] | None:
    """After the run ended on the device: every byte of its log stored, its final summary written.

    A live follower reads to the end on its own (it sees the run final): waited for. A dead or
    missing one is replaced here, in this process, by a follower that resumes from the stored
    offset, reads to the end and closes the run. Returns the final summary (None when another
    live follower still holds the run after ``wait_s``)."""
    rid, f = _lease(engine, run_id)
    if f.get("supervised") is False and not f.get("owner"):
        return None  # deployed --no-follow and never watched: nothing of it is ingested
    end = time.monotonic() + wait_s
    while True:
        st = status(engine, rid)
        if st.state == "done":
            _rid, done = _lease(engine, rid)
            _wait_gone(done, max(0.0, end - time.monotonic()) + 5.0)
            return {"done": True, "offset": done.get("offset")}
        if st.state in ("none", "gone"):
            break
        if time.monotonic() >= end:
            if st.state == "starting":
                break  # a spawned follower that never took the lease: read here instead
            return None
        time.sleep(0.2)
    reader = Follower(engine, rid, transport=transport, telemetry=False)
    if not reader.acquire():
        return None
    return reader.run()


def _wait_gone(lease: dict[str, Any], timeout: float) -> None:
    """The follower that read the end exits right after: waited for (on this host), so a stop leaves
    no process of the run behind when it returns."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and not owner.gone(lease.get("pid"), lease.get("host"), lease.get("start")):
        if lease.get("host") != socket.gethostname()[:255]:
            return  # another host's: not ours to wait for
        time.sleep(0.1)


def stop(
    engine: Engine,
    run_id: str,
    *,
    opts: Options | None = None,
    holder: Holder | None = None,
    force: bool = False,
) -> Deployment:
    """``control.stop`` (processes killed and seen gone, memory released; ``holder``/``force`` as
    there: someone else's run refused unless forced), then :func:`drain`: when this returns, what
    the device wrote is stored. A drain that cannot reach the device leaves the run stopped and
    says so in its follower lease (the stop itself stands)."""
    opts = opts or Options()
    dep = control.stop(engine, run_id, opts=opts, holder=holder, force=force)
    if dep.state == DeploymentState.STOPPED and dep.run_id:
        try:
            drain(engine, dep.run_id, transport=opts.transport)
        except EdgelabError as err:
            from edgelab.deploy.follow import record_failure

            record_failure(engine, dep.run_id, f"after stop, the device's log could not be read: {err}")
    return dep
