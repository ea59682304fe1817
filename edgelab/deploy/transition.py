"""A deployment's state changes, in one function the deploying CLI, stop, refresh and the follower share.

A deployment moves ``pending -> starting -> running`` and then to one final state (finished,
failed, stopped, device-lost); a device-lost one may still end as stopped, finished or failed
once its processes are seen again. Each change is one write transaction that also mirrors the
state on the run and, on entering a final state, releases the reservation and the lease pin, so
no signal between two statements leaves a final deployment holding memory. The exception is a
deployment marked ``to_stop`` (its processes were never seen to end): it keeps its reservation
until a stop proves them gone. A change out of a
final state (another process ended it first) is not made: the first final state stands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from edgelab.lease.use import unpin
from edgelab.store.db import session_scope
from edgelab.store.deployments import Deployment, DeploymentState, add_phase, get_deployment, release
from edgelab.store.models import utcnow
from edgelab.store.runs import FINAL_STATES, Run, RunState, set_state

S = DeploymentState
# from -> the states it may move to (a state may always be "moved to" itself: a phase, an edit)
NEXT: dict[str, frozenset[str]] = {
    S.PENDING: frozenset({S.STARTING, *FINAL_STATES}),
    S.STARTING: frozenset({S.RUNNING, *FINAL_STATES}),
    S.RUNNING: FINAL_STATES,
    S.DEVICE_LOST: frozenset({S.STOPPED, S.FINISHED, S.FAILED}),
}

Edit = Callable[[Session, Deployment], None]


def allowed(current: str, to: str) -> bool:
    return to == current or to in NEXT.get(current, ())


def sync_run(s: Session, dep: Deployment) -> None:
    """Mirror the deployment's state on its run (a deployment is a run; the run has fewer states)."""
    run = s.get(Run, dep.run_id)
    want = RunState.PENDING if dep.state in (S.PENDING, S.STARTING) else dep.state
    if run is not None and run.state != want:
        set_state(s, run, want, error=dep.error)


def transition(
    engine: Engine,
    dep_id: int,
    to: str | None = None,
    *,
    phase: str | None = None,
    edit: Edit | None = None,
    values: dict[str, Any] | None = None,
    **phase_info: Any,
) -> Deployment:
    """Move deployment ``dep_id`` to state ``to`` (None: keep it), set ``values`` on it (column ->
    value) and apply ``edit`` (what values cannot say: its process rows), record ``phase``.

    Entering ``running`` stamps ``started_at``; entering a final state stamps ``ended_at``,
    releases the reservation (unless ``to_stop``) and unpins the lease. Returns the deployment as written (or as
    found, when ``to`` is not allowed from its current state).
    """
    with session_scope(engine) as s:
        dep = get_deployment(s, dep_id)
        if to is not None and not allowed(dep.state, to):
            return dep
        for column, value in (values or {}).items():
            setattr(dep, column, value)
        if edit is not None:
            edit(s, dep)
        if to is not None and to != dep.state:
            dep.state = to
            if to == S.RUNNING:
                dep.started_at = utcnow()
            if to in FINAL_STATES:
                dep.ended_at = utcnow()
        if to in FINAL_STATES:
            if not dep.to_stop:  # memory is released only once the processes are seen gone
                release(s, dep.pk)
            unpin(s, dep)
        if phase:
            add_phase(dep, phase, **phase_info)
        s.add(dep)
        s.flush()
        sync_run(s, dep)
        return dep
