"""Device leases in the database: who holds which physical device, until when (DESIGN §8).

One open lease per physical device is a database fact, not a convention: each device a lease
covers is a ``lease_device`` row whose ``held_key`` is the device's physical key while the lease
is open and NULL once it ended, under a unique constraint. Two writers racing for the last free
device cannot both commit, on SQLite or PostgreSQL, whatever locking the caller did.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlmodel import Field, SQLModel

import edgelab.store.models  # noqa: F401 - the device table lease_device refers to
from edgelab.store.base import _ts, utcnow


class Lease(SQLModel, table=True):
    """A holder's claim on one or more devices; renewed by heartbeats, ended by release, expiry or kick."""

    __tablename__ = "lease"
    __table_args__ = (Index("ix_lease_open", "released_at", "expires_at"),)

    id: str = Field(sa_column=Column(String(24), primary_key=True))
    owner: str = Field(max_length=128)  # user@host
    ci_job: str | None = Field(default=None, max_length=128)  # e.g. gitlab job 4711, github run 99
    purpose: str = Field(default="", max_length=255)
    auto: bool = False  # taken by a workload for itself: it ends when its last user ends
    users: int = 0  # workloads using it now (a crashed one is covered by expiry)
    ttl_s: float = 1800.0
    acquired_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))
    heartbeat_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))
    expires_at: datetime = Field(sa_column=_ts(nullable=False))
    released_at: datetime | None = Field(default=None, sa_column=_ts())
    end_reason: str | None = Field(default=None, max_length=16)  # released | expired | kicked
    ended_by: str | None = Field(default=None, max_length=255)  # who released or kicked it


class LeaseDevice(SQLModel, table=True):
    """One device under one lease; ``held_key`` (unique) is set only while the lease is open."""

    __tablename__ = "lease_device"
    __table_args__ = (UniqueConstraint("held_key", name="uq_lease_device_held_key"),)

    id: int | None = Field(default=None, primary_key=True)
    lease_id: str = Field(
        sa_column=Column(String(24), ForeignKey("lease.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    device_id: int | None = Field(
        default=None, sa_column=Column(Integer, ForeignKey("device.id", ondelete="SET NULL"), nullable=True)
    )
    device_name: str = Field(max_length=64)  # as it was named then
    physical_key: str = Field(max_length=300)
    held_key: str | None = Field(default=None, max_length=300)
