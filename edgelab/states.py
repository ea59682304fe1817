"""The states of runs, deployments and their processes: one vocabulary every layer compares against.

A leaf (it imports nothing of edgelab), so the store, the domain and the read models name the same
members; the values are what the database holds and the events carry (StrEnum: a member is its string).
"""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    """A run's state: pending -> running -> finished | failed | stopped | device-lost."""

    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"
    DEVICE_LOST = "device-lost"


class DeploymentState(StrEnum):
    """A deployment's state: pending -> starting -> running -> finished | failed | stopped | device-lost.

    A refused deploy never becomes a deployment: it is an attempt (``AttemptOutcome.REFUSED``)."""

    PENDING = "pending"
    STARTING = "starting"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"
    DEVICE_LOST = "device-lost"


class ProcessState(StrEnum):
    """One process of a deployment, as last seen: started, then ended one of four ways."""

    PENDING = "pending"
    RUNNING = "running"
    EXITED = "exited"  # ended by itself (its exit code kept)
    KILLED = "killed"  # a stop saw it gone
    GONE = "gone"  # found gone without a stop
    UNKNOWN = "unknown"  # a stop could not prove it gone


class AttemptOutcome(StrEnum):
    """What became of one ``deploy`` asked for."""

    ADMITTED = "admitted"
    REFUSED = "refused"


RUN_STATES = tuple(s.value for s in RunState)
DEPLOYMENT_STATES = tuple(s.value for s in DeploymentState)
# Nothing changes a run or a deployment in one of these any more (a device-lost deployment: only to
# stopped, finished or failed). The one set of final states: a deployment's are its run's.
FINAL_STATES: frozenset[str] = frozenset(
    {RunState.FINISHED, RunState.FAILED, RunState.STOPPED, RunState.DEVICE_LOST}
)
# A run that may still change (its device is busy).
ACTIVE_RUN_STATES: frozenset[str] = frozenset({RunState.PENDING, RunState.RUNNING})
# A deployment whose processes may be alive.
ACTIVE_DEPLOYMENT_STATES: frozenset[str] = frozenset(
    {DeploymentState.PENDING, DeploymentState.STARTING, DeploymentState.RUNNING}
)
GONE_PROCESS_STATES: frozenset[str] = frozenset({ProcessState.KILLED, ProcessState.EXITED, ProcessState.GONE})
