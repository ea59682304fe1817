"""The follower's heartbeat on its device: when the device last answered, and what a silence means.

Shared by the reader (its reads are the beats) and the driver (a ``true`` every poll), so a device
that freezes is marked device-lost within LOSS_S whatever the follower was waiting for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy import Engine

from edgelab.deploy.follow.target import READ_TIMEOUT_S, connect
from edgelab.errors import TransportError
from edgelab.logs import swallowed
from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.store.db import session_scope
from edgelab.store.deployments import GONE_PROCESS_STATES, DeploymentState, get_deployment, processes

log = logging.getLogger(__name__)

LOSS_S = 10.0  # a device that has not answered the follower this long is marked device-lost
BACKOFF_MAX_S = 4.0  # retries of a failed read back off up to this


class Following(Protocol):
    """What the heartbeat, the reader and the driver need of the follower they work for."""

    engine: Engine
    run_id: str
    transport: dict[str, Any]
    poll_s: float
    lease_s: float
    error: str | None
    final: dict[str, Any] | None

    def still_mine(self) -> bool: ...

    def start_sampler(self, ing: Ingestor) -> Any: ...


def within(timeout: float, fn: Callable[[], Any], late: Callable[[Any], None] | None = None) -> Any:
    """``fn()`` waited for at most ``timeout``: past it the device is silent (TransportError).

    A transport bounds each wait by its timeout, but one call may chain several (a dead pooled
    connection reconnected, the TERM and KILL of a command that started just before the freeze),
    so the heartbeat's budget cannot rest on them. A late result goes to ``late`` (a connection
    opened after the caller gave up is closed there) and is otherwise dropped.
    """
    box: dict[str, Any] = {}
    lock = threading.Lock()

    def call() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting caller
            box["error"] = e
        with lock:
            box["done"] = True
            if box.get("gave_up") and "value" in box and late is not None:
                late(box["value"])

    th = threading.Thread(target=call, name="follower-beat", daemon=True)
    th.start()
    th.join(timeout)
    with lock:
        if not box.get("done"):
            box["gave_up"] = True
            raise TransportError(
                f"the device did not answer within {timeout:g} s",
                remedy="check the device (`edgelab device check`)",
            )
    if "error" in box:
        raise box["error"]
    return box.get("value")


def close(t: Any) -> None:
    with swallowed(log, "closing the device connection"):
        t.close()


def answers(f: Following, endpoint: Any) -> Any:
    """A fresh connection that runs ``true`` (two tries' time: connect, then run), or None (silent)."""

    def ask():
        fresh = connect(endpoint, f.transport)
        try:
            fresh.run(["true"], timeout=READ_TIMEOUT_S)
        except BaseException:
            close(fresh)
            raise
        return fresh

    try:
        return within(2 * READ_TIMEOUT_S, ask, late=close)
    except TransportError:
        return None


def device_lost(f: Following, why: str):
    """No answer for LOSS_S: the run is device-lost, its memory held and its processes marked to stop."""
    from edgelab.deploy.transition import transition

    with session_scope(f.engine, write=False) as s:
        dep = get_deployment(s, f.run_id)
        unseen = any(r.pid and r.state not in GONE_PROCESS_STATES for r in processes(s, dep.pk))

    def lost(s, d) -> None:
        d.error, d.to_stop = why[:2000], unseen

    return transition(
        f.engine,
        dep.pk,
        DeploymentState.DEVICE_LOST,
        phase=DeploymentState.DEVICE_LOST,
        edit=lost,
        by="follower",
    )


class Heartbeat:
    """When the device last answered the follower, and what a silence means.

    Every answer (a read of the log, a ``true``) resets it. A failed one is retried with backoff
    until one more wait and try could not leave time for the check (2 tries) inside ``LOSS_S`` of
    the last answer; then a fresh connection decides: it answers (this connection was bad: ``t``
    becomes the fresh one) or the run is marked device-lost (memory held, processes to stop).
    """

    def __init__(self, follower: Following, endpoint: Any, t: Any):
        self.follower, self.endpoint, self.t = follower, endpoint, t
        self.last_ok = time.monotonic()
        self.failing_since: float | None = None  # first failed try of the current outage
        self.delay = follower.poll_s
        self.fresh: Any = None  # a connection this heartbeat opened (close() closes it)

    def answered(self) -> None:
        self.last_ok, self.failing_since, self.delay = time.monotonic(), None, self.follower.poll_s

    def failed(self, err: Exception, ing: Ingestor) -> None:
        """A try failed: transient until proven otherwise; the first of an outage is said in the run."""
        if self.failing_since is None:
            self.failing_since = time.monotonic()
            ing.feed(
                ev.ErrorEvent(
                    time.time(),
                    self.follower.run_id,
                    cls="infra",
                    message=f"follower: device did not answer, retrying: {err}"[:500],
                )
            )

    def decide(self, err: Exception) -> str:
        """``retry`` (budget left), ``answered`` (a fresh connection did: ``t`` is it) or ``lost``."""
        if time.monotonic() - self.last_ok + self.delay + 3 * READ_TIMEOUT_S < LOSS_S:
            return "retry"
        f = self.follower
        fresh = answers(f, self.endpoint)
        if fresh is not None:  # the device is there; this follower's connection was not
            close(self.t)
            self.t = self.fresh = fresh
            self.last_ok, self.failing_since = time.monotonic(), None
            return "answered"
        dep = device_lost(
            f, f"{f.run_id}: the device stopped answering the follower (no answer within {LOSS_S:g} s): {err}"
        )
        f.error = dep.error if dep.state == DeploymentState.DEVICE_LOST else None
        self.failing_since = None
        return "lost"

    def backoff(self, stop_event: threading.Event) -> bool:
        """Wait before the next try (doubling up to BACKOFF_MAX_S); True when ``stop_event`` was set."""
        if stop_event.wait(self.delay):
            return True
        self.delay = min(self.delay * 2, BACKOFF_MAX_S)
        return False

    def close(self) -> None:
        if self.fresh is not None:
            close(self.fresh)
