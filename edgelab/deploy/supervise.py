"""The follower as a service: every running deployment is followed, and a follower that dies is replaced.

A follower (:mod:`edgelab.deploy.follow`) records who it is in its lease (``run.meta["follower"]``:
pid, host and start time, heartbeat, byte offset). Nothing keeps a detached process alive, so the
commands that look at runs check it: ``ps``, ``watch``, ``deploy`` (:func:`supervise`) find a run
whose follower is gone (proven dead on this host, or silent past its lease anywhere) and start a
new one, which resumes from the stored offset of the device's log. ``stop`` ends a run and then
:func:`drain` reads the device's log to its end, through the live follower or in place of a dead
one, so every chunk the device wrote is stored before ``stop`` returns.

One run's follower is a :class:`FollowerService` (mobly's shape: ``start``, ``is_alive``, ``stop``)
in one of the :class:`Follow` modes; a deploy's caller names the mode (``launch.deploy(...,
follow=...)``, :func:`follow_run`), so the CLI, the TUI and a playbook follow their deployments
alike:

- ``edgelab deploy`` and the TUI's deploy dialog: ``DETACHED``. The deployment runs on after the
  command returns or the TUI is closed; a follower of its own outlives either, and logs to a file;
- a playbook's deploy step: ``THREAD``. Its deployments are ephemeral (stopped by the play, reaped
  once it is gone), so the follower lives exactly as long as the play, and the play's stop waits
  for it to store the end (:func:`stop`); no process of the play outlives it;
- ``deploy --no-follow``: ``NONE``, and supervision leaves the run so (``watch`` still follows it).

The viewers start one where none is alive: ``watch`` detached (a thread where no process can be
started), ``logs -f`` and the TUI's run screen a thread while they look.

The interface is functions of (engine, run id); what a follower is stays in ``follow``:

- :func:`status` -> ``Followed``: who follows the run, and whether that one is alive;
- :func:`ensure` starts a detached follower where none is alive (returns its pid, or None);
- :func:`supervise` does it for every running deployment (returns the run ids given one);
- :func:`follow_run`: a deployment's follower in the caller's :class:`Follow` mode;
- :func:`drain` after a stop: the device's log read to its end, the run's final summary written;
  :func:`stop` is ``control.stop`` then :func:`drain`, what every stop command calls.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import col, select

from edgelab.deploy import control, owner
from edgelab.deploy.follow import LEASE_S, Follower, FollowerThread, ensure_follower, log_path, spawn_detached
from edgelab.deploy.options import Options
from edgelab.errors import EdgelabError
from edgelab.lease.owner import Holder
from edgelab.store.db import session_scope
from edgelab.store.deployments import ACTIVE_STATES, Deployment, DeploymentState
from edgelab.store.runs import get_run

log = logging.getLogger(__name__)

SPAWN_GRACE_S = 30.0  # a follower started this recently may not hold its lease yet: not started again
DRAIN_WAIT_S = 20.0  # how long stop waits for a live follower's last read before reading itself


class FollowerState(StrEnum):
    """Whether a run's follower lives (a member is its word: what ``ps`` prints, what tests compare)."""

    ALIVE = "alive"
    GONE = "gone"  # proven dead, or silent past its lease
    STARTING = "starting"  # spawned moments ago, not yet holding the lease
    NONE = "none"  # never followed
    DONE = "done"  # it read the run's end


FOLLOWED = (FollowerState.ALIVE, FollowerState.STARTING)  # someone follows it now


@dataclass(frozen=True)
class Followed:
    """Who follows a run, and whether that one lives (:class:`FollowerState`)."""

    state: FollowerState
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
        return Followed(FollowerState.DONE, f.get("pid"), f.get("host"))
    spawned = f.get("spawned") or {}
    if spawned and time.time() - float(spawned.get("t", 0)) < SPAWN_GRACE_S:
        if not owner.gone(spawned.get("pid"), spawned.get("host"), spawned.get("start")):
            if spawned.get("pid") != f.get("pid"):  # not yet holding the lease: let it start
                return Followed(FollowerState.STARTING, spawned.get("pid"), spawned.get("host"))
    if not f.get("owner"):
        return Followed(FollowerState.NONE, why="never followed")
    pid, host = f.get("pid"), f.get("host")
    if owner.gone(pid, host, f.get("start")):
        return Followed(FollowerState.GONE, pid, host, f"follower pid {pid} on {host} is gone")
    age = time.time() - float(f.get("heartbeat", 0))
    if age >= lease_s:
        return Followed(
            FollowerState.GONE, pid, host, f"follower silent for {age:.0f} s (lease {lease_s:g} s)"
        )
    return Followed(FollowerState.ALIVE, pid, host)


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
    if status(engine, rid, lease_s=lease_s).state in (*FOLLOWED, FollowerState.DONE):
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
            "host": owner.this_host(),
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


class Follow(StrEnum):
    """How a deploy's caller has its run followed (see the module doc for who uses which)."""

    DETACHED = "detached"  # a process of its own, logging to a file: outlives the caller
    THREAD = "thread"  # a daemon thread of the caller: lives as long as the caller or the run
    NONE = "none"  # none, and supervision leaves the run so (``deploy --no-follow``)


class FollowerService:
    """One run's follower as a service: :meth:`start`, :meth:`is_alive`, :meth:`stop` (mobly's shape).

    At most one follower ingests a run (its lease), so ``start`` starts one only where none is
    alive; ``stop`` stops only the follower this service started (a thread, or a process it
    spawned: proven the same one by its start time), which hands over: the offset stored, the lease
    left to expire, so whoever looks next resumes it. A follower that reads the run's end stops on
    its own (:meth:`wait`).
    """

    def __init__(
        self,
        engine: Engine,
        run_id: str,
        mode: Follow = Follow.DETACHED,
        *,
        transport: dict[str, Any] | None = None,
        lease_s: float = LEASE_S,
        spawn: Callable[[str, dict[str, str]], int] = spawn_detached,
        asked: bool = True,
    ):
        self.engine, self.run_id, self.mode = engine, run_id, Follow(mode)
        self.transport, self.lease_s, self.spawn, self.asked = transport, lease_s, spawn, asked
        self.thread: FollowerThread | None = None  # THREAD: the one this service started
        self.pid: int | None = None  # DETACHED: the process this service spawned
        self._host: str | None = None
        self._start: str | None = None
        self.error: str | None = None  # why none could be started (follow_run)

    def start(self) -> bool:
        """Start a follower unless one is alive (or none is wanted); True when this one started it.

        DETACHED raises OSError where no process can be started here (the caller may fall back to
        THREAD); NONE only records that supervision leaves the run unfollowed."""
        if self.mode == Follow.NONE:
            unsupervised(self.engine, self.run_id)
            return False
        if self.mode == Follow.THREAD:
            self.thread = ensure_follower(
                self.engine, self.run_id, transport=self.transport, lease_s=self.lease_s
            )
            return self.thread is not None
        self.pid = ensure(self.engine, self.run_id, spawn=self.spawn, lease_s=self.lease_s, asked=self.asked)
        if self.pid is not None:
            self._host, self._start = owner.this_host(), owner.start_of(self.pid)
            log.info("run %s: follower pid %d, its log in %s", self.run_id, self.pid, self.log_path)
        return self.pid is not None

    @property
    def log_path(self) -> Path:
        """Where a detached follower of this run writes its log."""
        return log_path(self.run_id)

    def is_alive(self) -> bool:
        """Whether the run is followed now: by this service's follower or any live one (its lease)."""
        if self.thread is not None and self.thread.is_alive():
            return True
        return status(self.engine, self.run_id, lease_s=self.lease_s).state in FOLLOWED

    def _mine_running(self) -> bool:
        return (
            self.pid is not None
            and self._start is not None
            and not owner.gone(self.pid, self._host, self._start)
        )

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for this service's follower to end on its own (it read the run's
        end); True when none of it is left running."""
        if self.thread is not None:
            self.thread.join(timeout)
            return not self.thread.is_alive()
        end = time.monotonic() + timeout
        while self._mine_running():
            if time.monotonic() >= end:
                return False
            time.sleep(0.1)
        return True

    def stop(self, timeout: float = 30.0) -> None:
        """This service's follower hands over and is waited for (up to ``timeout``; 0: not waited).
        A follower someone else started is not this service's to stop."""
        if self.thread is not None:
            self.thread.stop(timeout)
        elif self._mine_running():
            assert self.pid is not None
            os.kill(self.pid, signal.SIGTERM)  # the follower's handler: hand over, then exit
            if timeout:
                self.wait(timeout)


def follow_run(
    engine: Engine, run_id: str, follow: Follow, *, transport: dict[str, Any] | None = None
) -> FollowerService:
    """A new deployment's follower in its caller's mode (``launch.deploy(..., follow=...)``).

    DETACHED, as ``edgelab deploy`` always did, also gives every other running deployment whose
    follower died a new one. A follower that cannot be started does not undo the deploy: it is
    logged, left in ``service.error``, and the next ``ps``, ``watch`` or deploy starts one."""
    service = FollowerService(engine, run_id, follow, transport=transport)
    try:
        service.start()
        if service.mode == Follow.DETACHED:
            supervise(engine)
    except (OSError, EdgelabError) as err:
        service.error = str(err)
        log.warning("run %s: no follower started (%s); `edgelab watch %s` starts one", run_id, err, run_id)
    return service


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
        if st.state == FollowerState.DONE:
            _rid, done = _lease(engine, rid)
            _wait_gone(done, max(0.0, end - time.monotonic()) + 5.0)
            return {"done": True, "offset": done.get("offset")}
        if st.state in (FollowerState.NONE, FollowerState.GONE):
            break
        if time.monotonic() >= end:
            if st.state == FollowerState.STARTING:
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
    if lease.get("pid") == os.getpid() and lease.get("host") == owner.this_host():
        return  # a thread of this process (a play's, a viewer's): done is the end of its reading
    end = time.monotonic() + timeout
    while time.monotonic() < end and not owner.gone(lease.get("pid"), lease.get("host"), lease.get("start")):
        if lease.get("host") != owner.this_host():
            return  # another host's: not ours to wait for
        time.sleep(0.1)


def stop(
    engine: Engine,
    run_id: str | int,
    *,
    opts: Options | None = None,
    holder: Holder | None = None,
    force: bool = False,
) -> Deployment:
    """``control.stop`` (processes killed and seen gone, memory released; ``holder``/``force`` as
    there: someone else's run refused unless forced), then :func:`drain`: when this returns, what
    the device wrote is stored. A drain that cannot reach the device leaves the run stopped and
    says so in its follower lease (the stop itself stands). ``run_id``: a run id or a deployment's
    id (as ``control.stop`` takes)."""
    opts = opts or Options()
    dep = control.stop(engine, run_id, opts=opts, holder=holder, force=force)
    if dep.state == DeploymentState.STOPPED and dep.run_id:
        try:
            drain(engine, dep.run_id, transport=opts.transport)
        except EdgelabError as err:
            from edgelab.deploy.follow import record_failure

            record_failure(engine, dep.run_id, f"after stop, the device's log could not be read: {err}")
    return dep
