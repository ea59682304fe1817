"""Runs and their evidence: run, request, raw sample (chunks, actions, tokens), summary,
telemetry sample, and a run's log/error/stage lines.

A run's state lives here, not in a process: any host can watch, stop or report it.
States: pending -> running -> finished | failed | stopped | device-lost.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Float, ForeignKey, Index, String, UniqueConstraint
from sqlmodel import Field, Session, SQLModel, col, select

from edgelab.errors import ConfigError, NotFound
from edgelab.states import ACTIVE_RUN_STATES as ACTIVE_STATES  # re-exported: the vocabulary is edgelab.states
from edgelab.states import FINAL_STATES as FINAL_STATES
from edgelab.states import RUN_STATES as RUN_STATES
from edgelab.states import RunState as RunState
from edgelab.store.base import _ts, utcnow


def _run_fk(nullable: bool = False) -> Column:
    return Column(String(32), ForeignKey("run.id", ondelete="CASCADE"), nullable=nullable)


def new_run_id() -> str:
    """Short, unique, sortable enough to type: ``r`` + 12 hex digits."""
    return "r" + secrets.token_hex(6)


class Run(SQLModel, table=True):
    __tablename__ = "run"
    __table_args__ = (Index("ix_run_created", "created_at"),)

    id: str = Field(default_factory=new_run_id, sa_column=Column(String(32), primary_key=True))
    pipeline: str | None = Field(default=None, max_length=64)
    device_name: str | None = Field(default=None, max_length=64)
    runtime: str | None = Field(default=None, max_length=64)
    strategy: str | None = Field(default=None, max_length=8)
    profile: str | None = Field(default=None, max_length=64)
    kind: str = Field(default="bench", max_length=16)  # bench | deploy | imported | playbook
    state: str = Field(default="pending", max_length=16)
    virtual: bool = False
    command: str | None = None
    error: str | None = None
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))
    started_at: datetime | None = Field(default=None, sa_column=_ts())
    finished_at: datetime | None = Field(default=None, sa_column=_ts())
    heartbeat_at: datetime | None = Field(default=None, sa_column=_ts())
    # the process driving the run while it starts (deploy) or runs (bench): pid, host and start
    # time, so another command can prove it gone (``edgelab.deploy.owner``) and reap what it left
    owner_pid: int | None = None
    owner_host: str | None = Field(default=None, max_length=255)
    owner_start: str | None = Field(default=None, max_length=64)
    provenance: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    meta: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class RunRequest(SQLModel, table=True):
    __tablename__ = "run_request"
    __table_args__ = (UniqueConstraint("run_id", "request", name="uq_run_request"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(sa_column=_run_fk())
    request: str = Field(max_length=128)
    phase: str = Field(default="measured", max_length=16)
    band: str | None = Field(default=None, max_length=16)
    submitted: float = Field(sa_column=Column(Float, nullable=False))  # lab clock, Unix s
    finished: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    ok: bool | None = None
    error: str | None = None
    metrics: dict | None = Field(default=None, sa_column=Column(JSON, nullable=True))


class RunSample(SQLModel, table=True):
    """One raw sample: an audio chunk, codec frames, an action chunk or text tokens."""

    __tablename__ = "run_sample"
    __table_args__ = (Index("ix_run_sample_run_id", "run_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(sa_column=_run_fk())
    request: str | None = Field(default=None, max_length=128)
    kind: str = Field(max_length=16)  # audio | codec | action | text
    idx: int | None = None
    t: float = Field(sa_column=Column(Float, nullable=False))  # lab clock, Unix s
    t_ms: float | None = Field(default=None, sa_column=Column(Float, nullable=True))  # since request sent
    n: int | None = None  # samples / frames / tokens
    sample_rate: int | None = None
    sha256: str | None = Field(default=None, max_length=64)
    terminal: bool | None = None
    obs_t: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    infer_start: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    infer_end: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    horizon: int | None = None
    dims: int | None = None


class RunSummary(SQLModel, table=True):
    """A run's figures: ``live`` (updated as it runs) and ``final`` (recomputed from raw samples)."""

    __tablename__ = "run_summary"
    __table_args__ = (UniqueConstraint("run_id", "kind", name="uq_run_summary_kind"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(sa_column=_run_fk())
    kind: str = Field(max_length=8)  # live | final
    computed_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))
    metrics: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    provenance: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class TelemetrySample(SQLModel, table=True):
    __tablename__ = "telemetry_sample"
    __table_args__ = (
        Index("ix_telemetry_device_t", "device_name", "t"),
        Index("ix_telemetry_run_t", "run_id", "t"),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: str | None = Field(default=None, sa_column=_run_fk(nullable=True))
    device_name: str | None = Field(default=None, max_length=64)
    t: float = Field(sa_column=Column(Float, nullable=False))
    source: str | None = Field(default=None, max_length=32)
    cpu_pct: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    rss_bytes: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    mem_available_bytes: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    gpu_util_pct: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    throttled: bool | None = None
    temps_c: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    clocks_mhz: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    power_w: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    virtual: bool | None = None  # from a virtual device's shim
    raw: dict | None = Field(default=None, sa_column=Column(JSON, nullable=True))  # all other fields, kept


class RunLog(SQLModel, table=True):
    """A run's log lines, errors (level = infra|device|workload) and stage timings, kept with the run."""

    __tablename__ = "run_log"
    __table_args__ = (Index("ix_run_log_run_id", "run_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(sa_column=_run_fk())
    t: float = Field(sa_column=Column(Float, nullable=False))
    kind: str = Field(max_length=8)  # log | error | stage
    level: str | None = Field(default=None, max_length=16)
    request: str | None = Field(default=None, max_length=128)
    message: str = ""
    data: dict | None = Field(default=None, sa_column=Column(JSON, nullable=True))


# --- API -----------------------------------------------------------------------------------------


def execution_of(run: Run) -> dict[str, Any]:
    """How a virtual device ran the run's build (edgelab.runtimes.emulation): ``mode`` native |
    emulated | lab-host-build, ``label``; {} on a real device or for the reference runtime.
    Read from the bench's provenance, or the plan a deployment was launched from."""
    prov = run.provenance or {}
    ex = (
        prov.get("execution")
        or (prov.get("plan") or {}).get("execution")
        or (run.meta or {}).get("execution")
    )
    return dict(ex) if isinstance(ex, dict) else {}


def emulated_label(run: Run) -> str:
    """ " (emulated: ...)" for a run whose figures came from an emulator, else ""."""
    ex = execution_of(run)
    return f" (emulated: {ex.get('emulator')}, {ex.get('target')})" if ex.get("emulated") else ""


def create_run(session: Session, **fields: Any) -> Run:
    """A new run row (state pending unless given); fields are Run's columns."""
    state = fields.get("state", "pending")
    if state not in RUN_STATES:
        raise ConfigError(f"unknown run state {state!r}", remedy=f"use one of {', '.join(RUN_STATES)}")
    run = Run(**fields)
    session.add(run)
    session.flush()
    return run


def get_run(session: Session, ref: str) -> Run:
    """A run by id or unique id prefix; NotFound with a remedy."""
    run = session.get(Run, ref)
    if run is not None:
        return run
    matches = session.exec(select(Run).where(Run.id.startswith(ref)).limit(2)).all() if ref else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise NotFound(f"run prefix {ref!r} is ambiguous", remedy="give more characters of the run id")
    raise NotFound(f"no run {ref!r}", remedy="list runs with: edgelab runs ls")


def list_runs(
    session: Session,
    *,
    limit: int = 50,
    device: str | None = None,
    pipeline: str | None = None,
    state: str | None = None,
) -> list[Run]:
    q = select(Run).order_by(col(Run.created_at).desc(), Run.id)
    if device:
        q = q.where(Run.device_name == device)
    if pipeline:
        q = q.where(Run.pipeline == pipeline)
    if state:
        q = q.where(Run.state == state)
    return list(session.exec(q.limit(limit)).all())


def runs_by_id(session: Session, ids: set[str] | list[str]) -> dict[str, Run]:
    """id -> run for those of ``ids`` that exist (a missing id is simply absent), in one query."""
    if not ids:
        return {}
    return {r.id: r for r in session.exec(select(Run).where(col(Run.id).in_(sorted(ids)))).all()}


def busy_device_names(session: Session) -> set[str]:
    """Names of devices with an active (pending or running) run."""
    names = session.exec(
        select(Run.device_name).where(col(Run.state).in_(sorted(ACTIVE_STATES))).distinct()
    ).all()
    return {n for n in names if n}


def set_state(session: Session, run: Run, state: str, *, error: str | None = None) -> Run:
    if state not in RUN_STATES:
        raise ConfigError(f"unknown run state {state!r}", remedy=f"use one of {', '.join(RUN_STATES)}")
    run.state = state
    now = utcnow()
    if state == RunState.RUNNING and run.started_at is None:
        run.started_at = now
    if state in FINAL_STATES:
        run.finished_at = now
    if error is not None:
        run.error = error
    run.heartbeat_at = now
    session.add(run)
    session.flush()
    return run


def mark_stale(session: Session, *, max_silence_s: float = 120.0) -> list[str]:
    """Runs still 'running' whose ingest stopped beating for ``max_silence_s``: marked failed,
    so no run stays running forever after its process died (the database is the truth)."""
    from datetime import timedelta

    cutoff = utcnow() - timedelta(seconds=max_silence_s)
    stale = session.exec(select(Run).where(col(Run.state).in_(sorted(ACTIVE_STATES)))).all()
    out = []
    for run in stale:
        beat = run.heartbeat_at or run.started_at or run.created_at
        if beat < cutoff:
            set_state(
                session, run, "failed", error=f"no heartbeat for over {max_silence_s:.0f} s (ingest died?)"
            )
            out.append(run.id)
    return out


def get_summary(session: Session, run_id: str, kind: str = "final") -> RunSummary | None:
    return session.exec(
        select(RunSummary).where(RunSummary.run_id == run_id, RunSummary.kind == kind)
    ).first()


def put_summary(
    session: Session, run_id: str, kind: str, metrics: dict, provenance: dict | None = None
) -> RunSummary:
    row = get_summary(session, run_id, kind) or RunSummary(run_id=run_id, kind=kind)
    row.metrics = metrics
    row.provenance = provenance or {}
    row.computed_at = utcnow()
    session.add(row)
    session.flush()
    return row


def requests_of(session: Session, run_id: str) -> list[RunRequest]:
    return list(
        session.exec(select(RunRequest).where(RunRequest.run_id == run_id).order_by(col(RunRequest.id))).all()
    )


def samples_of(
    session: Session, run_id: str, *, kind: str | None = None, after_id: int = 0
) -> list[RunSample]:
    q = select(RunSample).where(RunSample.run_id == run_id, col(RunSample.id) > after_id)
    if kind:
        q = q.where(RunSample.kind == kind)
    return list(session.exec(q.order_by(col(RunSample.id))).all())


def logs_of(session: Session, run_id: str, *, after_id: int = 0) -> list[RunLog]:
    """A run's log/error/stage lines stored after ``after_id``, oldest first (a follower's increment)."""
    q = select(RunLog).where(RunLog.run_id == run_id, col(RunLog.id) > after_id)
    return list(session.exec(q.order_by(col(RunLog.id))).all())


def telemetry_of(
    session: Session, *, run_id: str | None = None, device: str | None = None, limit: int = 100
) -> list[TelemetrySample]:
    q = select(TelemetrySample)
    if run_id:
        q = q.where(TelemetrySample.run_id == run_id)
    if device:
        q = q.where(TelemetrySample.device_name == device)
    rows = session.exec(q.order_by(col(TelemetrySample.t).desc()).limit(limit)).all()
    return list(reversed(rows))
