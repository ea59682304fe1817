"""Deployments in the database: the deployment (a run), its processes, memory reservations, attempts.

The database is the shared truth (DESIGN §8): another process (``edgelab ps`` in a second shell,
the TUI, a CI job) sees every reservation and pid, and can stop what this one started.
Reservations are made inside one write transaction (SQLite ``BEGIN IMMEDIATE``, PostgreSQL a row
lock on the device), so two deploys racing for one pool cannot both get it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlmodel import Field, Session, SQLModel, col, select

import edgelab.store.models  # noqa: F401 - the device table deployments and reservations refer to
import edgelab.store.runs  # noqa: F401 - the run table the deployment's run_id refers to
from edgelab.errors import NotFound
from edgelab.states import (
    ACTIVE_DEPLOYMENT_STATES as ACTIVE_STATES,  # re-exported: the vocabulary is edgelab.states
)
from edgelab.states import DEPLOYMENT_STATES as DEPLOYMENT_STATES
from edgelab.states import FINAL_STATES as FINAL_STATES
from edgelab.states import GONE_PROCESS_STATES as GONE_PROCESS_STATES
from edgelab.states import AttemptOutcome as AttemptOutcome
from edgelab.states import DeploymentState as DeploymentState
from edgelab.states import ProcessState as ProcessState
from edgelab.store.base import _ts, utcnow


class Deployment(SQLModel, table=True):
    """One deployment of a pipeline on a device; its ``run_id`` names the run everywhere else."""

    __tablename__ = "deployment"
    __table_args__ = (
        UniqueConstraint("run_id", name="uq_deployment_run_id"),
        Index("ix_deployment_device_state", "device_id", "state"),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(
        sa_column=Column(String(32), ForeignKey("run.id", ondelete="CASCADE"), nullable=False)
    )
    device_id: int = Field(
        sa_column=Column(Integer, ForeignKey("device.id", ondelete="CASCADE"), nullable=False)
    )
    device_name: str = Field(max_length=64)
    pipeline: str = Field(max_length=64)
    strategy: str = Field(max_length=8)
    runtime: str = Field(max_length=32)
    state: str = Field(
        default=DeploymentState.PENDING, max_length=16
    )  # pending starting running finished failed stopped device-lost
    error: str | None = None
    plan: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    admission: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    phases: list[dict] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    placement: list[dict] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    logs: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))  # fetched tails per file
    remote_dir: str = Field(default="", max_length=512)
    facts_hash: str | None = Field(default=None, max_length=64)
    virtual: bool = False
    owner: str | None = Field(default=None, max_length=64)  # user@host that started it
    lease_id: str | None = Field(default=None, max_length=24)  # the lease it keeps while it runs
    # its processes were never seen to end (device lost, cleanup interrupted): the reservation is kept
    # and the next command that reaches the device (or ``edgelab stop``) stops them, then releases
    to_stop: bool = False
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))
    started_at: datetime | None = Field(default=None, sa_column=_ts())
    ended_at: datetime | None = Field(default=None, sa_column=_ts())

    @property
    def pk(self) -> int:
        """``id`` of the written row (the database gives it on flush; a new row has none yet)."""
        if self.id is None:
            raise ValueError(f"{type(self).__name__} {self.run_id!r} is not written yet: it has no id")
        return self.id


class DeploymentProcess(SQLModel, table=True):
    """One detached process of a deployment: exact argv, its group's pid, its log files."""

    __tablename__ = "deployment_process"

    id: int | None = Field(default=None, primary_key=True)
    deployment_id: int = Field(
        sa_column=Column(Integer, ForeignKey("deployment.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    name: str = Field(max_length=64)
    argv: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    workdir: str = Field(default="", max_length=512)
    pid: int | None = None  # the process-group leader on the device
    state: str = Field(default=ProcessState.PENDING, max_length=16)  # a ProcessState
    exit_code: int | None = None
    started_at: datetime | None = Field(default=None, sa_column=_ts())
    stopped_at: datetime | None = Field(default=None, sa_column=_ts())


class Reservation(SQLModel, table=True):
    """Bytes of one named memory pool held by one deployment or bench run until ``released_at``.

    ``lease_id`` ties it to its holder's lease: a reservation whose workload died (its lease ended
    or expired, and no running deployment keeps it) no longer counts, so a SIGKILLed bench does not
    hold memory forever.
    """

    __tablename__ = "reservation"
    __table_args__ = (Index("ix_reservation_device_open", "device_id", "released_at"),)

    id: int | None = Field(default=None, primary_key=True)
    deployment_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("deployment.id", ondelete="CASCADE"), nullable=True, index=True),
    )
    run_id: str | None = Field(default=None, max_length=32)  # a bench run's (no deployment)
    lease_id: str | None = Field(default=None, max_length=24)
    device_id: int = Field(
        sa_column=Column(Integer, ForeignKey("device.id", ondelete="CASCADE"), nullable=False)
    )
    pool: str = Field(max_length=64)
    bytes: int = Field(sa_column=Column(BigInteger, nullable=False))
    capacity: int = Field(sa_column=Column(BigInteger, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))
    released_at: datetime | None = Field(default=None, sa_column=_ts())


class DeployAttempt(SQLModel, table=True):
    """Every ``deploy`` asked for, admitted or refused (with code, pool, numbers and remedy)."""

    __tablename__ = "deploy_attempt"

    id: int | None = Field(default=None, primary_key=True)
    device_name: str = Field(max_length=64, index=True)
    pipeline: str = Field(max_length=64)
    strategy: str | None = Field(default=None, max_length=8)  # requested (None: automatic)
    runtime: str | None = Field(default=None, max_length=32)
    dry_run: bool = False
    outcome: str = Field(max_length=16)  # an AttemptOutcome
    code: str | None = Field(default=None, max_length=32)
    pool: str | None = Field(default=None, max_length=64)
    message: str | None = None
    remedy: str | None = None
    numbers: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    deployment_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("deployment.id", ondelete="SET NULL"), nullable=True),
    )
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))


def get_deployment(session: Session, ref: str | int) -> Deployment:
    """By run id (``r...``) or numeric id; NotFound with a remedy."""
    ref_s = str(ref)
    if isinstance(ref, int):
        dep = session.get(Deployment, ref)
    else:
        query = (
            select(Deployment).where(Deployment.id == int(ref_s))
            if ref_s.isdigit()
            else select(Deployment).where(Deployment.run_id == ref_s)
        )
        dep = session.exec(query).first()
    if dep is None:
        raise NotFound(f"no deployment {ref_s!r}", remedy="see `edgelab ps --all` for run ids")
    return dep


def list_deployments(
    session: Session, *, active_only: bool = True, device_id: int | None = None
) -> list[Deployment]:
    """Newest first; ``active_only``: those that run or may still run (marked ``to_stop``)."""
    query = select(Deployment)
    if active_only:
        query = query.where(
            col(Deployment.state).in_(sorted(ACTIVE_STATES)) | (col(Deployment.to_stop) == True)  # noqa: E712
        )
    if device_id is not None:
        query = query.where(Deployment.device_id == device_id)
    return list(
        session.exec(query.order_by(col(Deployment.created_at).desc(), col(Deployment.id).desc())).all()
    )


def processes(session: Session, deployment_id: int) -> list[DeploymentProcess]:
    return list(
        session.exec(
            select(DeploymentProcess)
            .where(DeploymentProcess.deployment_id == deployment_id)
            .order_by(col(DeploymentProcess.id))
        ).all()
    )


def open_reservations(session: Session, device_id: int) -> list[Reservation]:
    """What holds memory on the device now; a dead workload's reservation (its lease over) does not."""
    from edgelab.store.leases import Lease

    now = utcnow()
    rows = session.exec(
        select(Reservation).where(Reservation.device_id == device_id, Reservation.released_at == None)  # noqa: E711
    ).all()
    out = []
    for r in rows:
        if r.lease_id:
            lease = session.get(Lease, r.lease_id)
            over = lease is None or lease.released_at is not None or lease.expires_at < now
            dep = session.get(Deployment, r.deployment_id) if r.deployment_id else None
            if over and (dep is None or (dep.state != "running" and not dep.to_stop)):
                continue
        out.append(r)
    return out


def _release_open(session: Session, owner_clause: Any) -> int:
    """Mark the open reservations matching ``owner_clause`` released; returns how many were open."""
    now = utcnow()
    rows = session.exec(select(Reservation).where(owner_clause, Reservation.released_at == None)).all()  # noqa: E711
    for r in rows:
        r.released_at = now
        session.add(r)
    return len(rows)


def release_run(session: Session, run_id: str) -> int:
    """Release a bench run's reservations."""
    return _release_open(session, Reservation.run_id == run_id)


def release(session: Session, deployment_id: int) -> int:
    """Release every open reservation of a deployment; returns how many were open."""
    return _release_open(session, Reservation.deployment_id == deployment_id)


def add_phase(dep: Deployment, name: str, **info: Any) -> None:
    """Append a start-up phase (reassigned, so SQLAlchemy sees the JSON change)."""
    dep.phases = [*dep.phases, {"phase": name, "t": utcnow().isoformat(), **info}]


def record_attempt(session: Session, attempt: DeployAttempt) -> DeployAttempt:
    session.add(attempt)
    session.flush()
    return attempt


def list_attempts(session: Session, device_name: str | None = None) -> list[DeployAttempt]:
    query = select(DeployAttempt)
    if device_name:
        query = query.where(DeployAttempt.device_name == device_name)
    return list(session.exec(query.order_by(col(DeployAttempt.id).desc())).all())
