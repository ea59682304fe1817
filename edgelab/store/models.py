"""The device tables (device, probe snapshot). No secret (password, token, private key) is ever a column.

The other tables live with their concept (``runs``, ``deployments``, ``artifacts``, ``leases``,
``matrix``); ``edgelab.store.tables`` imports them all for the one metadata migrations are checked against.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Column, ForeignKey, Index, Integer, UniqueConstraint
from sqlmodel import Field, SQLModel

from edgelab.store.base import _ts, utcnow


class Device(SQLModel, table=True):
    """One device of the lab and how to reach it."""

    __tablename__ = "device"
    __table_args__ = (UniqueConstraint("name", name="uq_device_name"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=64)  # unique (uq_device_name), which indexes it
    device_class: str | None = Field(
        default=None, max_length=32, index=True
    )  # jetson, npu_phone, x86_cpu, ...
    transport: str = Field(max_length=8)  # ssh | adb | local
    # ssh address
    ssh_user: str | None = Field(default=None, max_length=64)
    ssh_host: str | None = Field(default=None, max_length=255)
    ssh_port: int | None = None
    ssh_jump: str | None = Field(default=None, max_length=255)
    shell: str = Field(default="posix", max_length=16)  # posix | toybox | powershell
    # adb address
    adb_serial: str | None = Field(default=None, max_length=128)
    adb_server: str | None = Field(default=None, max_length=255)  # host:port, None = local server
    # trust: the operator-approved SSH host key, "SHA256:..." (a public fingerprint, not a secret)
    host_key_fingerprint: str | None = Field(default=None, max_length=128)
    host_key_type: str | None = Field(default=None, max_length=64)
    tags: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    notes: str = Field(default="")
    state: str = Field(default="unknown", max_length=16)  # online | offline | unauthorized | unknown | ...
    state_detail: str | None = None
    last_seen: datetime | None = Field(default=None, sa_column=_ts())
    last_checked: datetime | None = Field(default=None, sa_column=_ts())
    virtual: bool = Field(default=False)
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))
    updated_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))

    def endpoint(self):
        """The transport endpoint for this row (no secrets: keys come from ssh config/agent)."""
        from edgelab.transport.base import Endpoint

        return Endpoint.of_device(self)

    @property
    def pk(self) -> int:
        """``id`` of the written row (the database gives it on flush; a new row has none yet)."""
        if self.id is None:
            raise ValueError(f"{type(self).__name__} {self.name!r} is not written yet: it has no id")
        return self.id


class ProbeSnapshot(SQLModel, table=True):
    """One probe of one device: raw outputs (re-parseable by a newer edgelab), facts, classification.

    Written by the probe service (edgelab.inventory.probe; API in edgelab/store/snapshots.py); kept
    beside the device table it refers to.
    """

    __tablename__ = "probe_snapshot"
    __table_args__ = (Index("ix_probe_snapshot_device_taken", "device_id", "taken_at"),)

    id: int | None = Field(default=None, primary_key=True)
    device_id: int = Field(
        sa_column=Column(Integer, ForeignKey("device.id", ondelete="CASCADE"), nullable=False)
    )
    device_name: str = Field(max_length=64)  # as it was named then
    taken_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))
    duration_s: float = 0.0
    edgelab_version: str = Field(max_length=32)
    family: str = Field(max_length=16)  # linux | android | windows
    ok: bool = False
    error: str | None = None
    raw: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    facts: dict | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    facts_hash: str | None = Field(default=None, max_length=64)  # sha256 of the canonical facts JSON
    device_class: str | None = Field(default=None, max_length=32)
    catalog_entry: str | None = Field(default=None, max_length=64)
    classification: dict | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    warnings: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    virtual: bool = False
