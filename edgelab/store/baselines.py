"""Named baselines: a set of runs that later runs of one device, pipeline, strategy and runtime are
compared with (``edgelab runs baseline``, a playbook's relative gates).

Setting a name again appends a row; the newest row of a (name, device, pipeline, strategy, runtime)
key is the baseline, the older ones its history, so who moved a baseline and when stays on
record (a nightly CI that updates its baseline on success leaves one row a night).
Migration 0010 creates the table.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Column, Index, String
from sqlmodel import Field, Session, SQLModel, col, select

from edgelab.errors import ConfigError, NotFound
from edgelab.store.base import _ts, utcnow

KEY = ("device", "pipeline", "strategy", "runtime")


class Baseline(SQLModel, table=True):
    __tablename__ = "baseline"
    __table_args__ = (Index("ix_baseline_name", "name", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(String(64), nullable=False))
    device: str = Field(max_length=64)
    pipeline: str = Field(max_length=64)
    strategy: str | None = Field(default=None, max_length=8)
    runtime: str | None = Field(default=None, max_length=64)
    runs: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    set_by: str = Field(max_length=200)  # user@host (+ the CI job), never a secret
    set_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))
    note: str | None = None

    def key(self) -> tuple[str, str, str | None, str | None]:
        return (self.device, self.pipeline, self.strategy, self.runtime)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "device": self.device,
            "pipeline": self.pipeline,
            "strategy": self.strategy,
            "runtime": self.runtime,
            "runs": list(self.runs),
            "set_by": self.set_by,
            "set_at": self.set_at.isoformat(),
            "note": self.note,
        }


def add_baseline(
    session: Session,
    name: str,
    *,
    device: str,
    pipeline: str,
    strategy: str | None,
    runtime: str | None,
    runs: list[str],
    set_by: str,
    note: str | None = None,
) -> Baseline:
    """Record ``runs`` as baseline ``name`` of that key (a new row: the old one stays as history)."""
    if not name or len(name) > 64 or ":" in name or "," in name:
        raise ConfigError(
            f"baseline name {name!r} must be 1-64 characters without ':' or ','", remedy="e.g. nightly"
        )
    if not runs:
        raise ConfigError("a baseline needs at least one run", remedy="edgelab runs baseline set NAME RUN...")
    row = Baseline(
        name=name,
        device=device,
        pipeline=pipeline,
        strategy=strategy,
        runtime=runtime,
        runs=list(runs),
        set_by=set_by[:200],
        note=note,
    )
    session.add(row)
    session.flush()
    return row


def current_baselines(session: Session, name: str | None = None) -> list[Baseline]:
    """The newest row of every key (of ``name``, if given), by name then key."""
    q = select(Baseline).order_by(col(Baseline.id).desc())
    if name is not None:
        q = q.where(Baseline.name == name)
    seen: dict[tuple, Baseline] = {}
    for row in session.exec(q).all():
        seen.setdefault((row.name, *row.key()), row)
    return sorted(
        seen.values(), key=lambda r: (r.name, r.device, r.pipeline, r.strategy or "", r.runtime or "")
    )


def history(session: Session, name: str) -> list[Baseline]:
    """Every row ever set under ``name``, newest first."""
    return list(
        session.exec(select(Baseline).where(Baseline.name == name).order_by(col(Baseline.id).desc())).all()
    )


def find_baseline(
    session: Session,
    name: str,
    *,
    device: str | None = None,
    pipeline: str | None = None,
    strategy: str | None = None,
    runtime: str | None = None,
) -> Baseline:
    """The current baseline ``name`` whose key matches what is given; NotFound or ambiguous says which exist."""
    rows = current_baselines(session, name)
    if not rows:
        raise NotFound(f"no baseline {name!r}", remedy="set one with: edgelab runs baseline set NAME RUN...")
    want = {"device": device, "pipeline": pipeline, "strategy": strategy, "runtime": runtime}
    hits = [r for r in rows if all(v is None or getattr(r, k) == v for k, v in want.items())]
    if len(hits) == 1:
        return hits[0]
    keys = "; ".join("/".join(str(x or "-") for x in r.key()) for r in rows)
    if not hits:
        given = "/".join(str(v or "*") for v in want.values())
        raise NotFound(
            f"baseline {name!r} has no entry for {given} (it has: {keys})",
            remedy=f"set it with: edgelab runs baseline set {name} RUN...",
        )
    raise ConfigError(
        f"baseline {name!r} is set for several device/pipeline/strategy/runtime keys ({keys})",
        remedy="name the device and pipeline (--device, --pipeline) or compare runs of one of them",
    )
