"""Probe snapshots in the database: add one, read the latest, list a device's history.

Facts are stored as JSON with a hash of their canonical form, so two probes that saw the same
device compare by hash, and a provenance block can name exactly which facts a run used.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from edgelab.errors import NotFound
from edgelab.store.devices import get_device
from edgelab.store.models import Device, ProbeSnapshot

__all__ = [
    "ProbeSnapshot",
    "add_snapshot",
    "canonical_json",
    "facts_hash",
    "latest_per_device",
    "latest_snapshot",
    "list_snapshots",
]


def canonical_json(data: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 as is: the same facts always give the same text."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def facts_hash(facts: dict[str, Any]) -> str:
    """sha256 of the canonical facts JSON, without the volatile parts (warnings name no fact)."""
    stable = {k: v for k, v in facts.items() if k != "warnings"}
    return hashlib.sha256(canonical_json(stable).encode("utf-8")).hexdigest()


def add_snapshot(session: Session, snapshot: ProbeSnapshot) -> ProbeSnapshot:
    session.add(snapshot)
    session.flush()
    return snapshot


def latest_snapshot(
    session: Session, name: str, *, ok_only: bool = True, device: Device | None = None
) -> ProbeSnapshot:
    """The newest (successful, by default) snapshot of device ``name``; NotFound with a remedy.
    ``device``: its row, where the caller already holds it (not read again)."""
    device = device if device is not None and device.name == name else get_device(session, name)
    query = select(ProbeSnapshot).where(ProbeSnapshot.device_id == device.id)
    if ok_only:
        query = query.where(ProbeSnapshot.ok == True)  # noqa: E712 - SQL expression
    snap = session.exec(
        query.order_by(col(ProbeSnapshot.taken_at).desc(), col(ProbeSnapshot.id).desc())
    ).first()
    if snap is None:
        raise NotFound(
            f"{name} has no {'successful ' if ok_only else ''}probe snapshot yet",
            remedy=f"run `edgelab probe {name}`",
        )
    return snap


def list_snapshots(session: Session, name: str, *, limit: int = 20) -> list[ProbeSnapshot]:
    """A device's snapshots, newest first."""
    device = get_device(session, name)
    query = (
        select(ProbeSnapshot)
        .where(ProbeSnapshot.device_id == device.id)
        .order_by(col(ProbeSnapshot.taken_at).desc(), col(ProbeSnapshot.id).desc())
        .limit(limit)
    )
    return list(session.exec(query).all())


def latest_per_device(session: Session, device_ids: list[int] | None = None) -> dict[int, tuple]:
    """device id -> (taken_at, ok, facts) of its newest snapshot, in one query whatever the fleet size."""
    newest = select(col(ProbeSnapshot.device_id), func.max(ProbeSnapshot.id).label("sid")).group_by(
        col(ProbeSnapshot.device_id)
    )
    if device_ids is not None:
        newest = newest.where(col(ProbeSnapshot.device_id).in_(device_ids))
    sub = newest.subquery()
    rows = session.exec(
        select(ProbeSnapshot.device_id, ProbeSnapshot.taken_at, ProbeSnapshot.ok, ProbeSnapshot.facts).join(
            sub, col(ProbeSnapshot.id) == sub.c.sid
        )
    ).all()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def snapshot_history(session: Session, device_id: int, *, limit: int = 30) -> list[ProbeSnapshot]:
    """A device's snapshots, newest first (successful or not): its probe history."""
    return list(
        session.exec(
            select(ProbeSnapshot)
            .where(ProbeSnapshot.device_id == device_id)
            .order_by(col(ProbeSnapshot.taken_at).desc(), col(ProbeSnapshot.id).desc())
            .limit(limit)
        ).all()
    )
