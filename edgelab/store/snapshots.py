"""Probe snapshots in the database: add one, read the latest, list a device's history.

Facts are stored as JSON with a hash of their canonical form, so two probes that saw the same
device compare by hash, and a provenance block can name exactly which facts a run used.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlmodel import Session, col, select

from edgelab.errors import NotFound
from edgelab.store.devices import get_device
from edgelab.store.models import ProbeSnapshot

__all__ = ["ProbeSnapshot", "add_snapshot", "canonical_json", "facts_hash", "latest_snapshot", "list_snapshots"]


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


def latest_snapshot(session: Session, name: str, *, ok_only: bool = True) -> ProbeSnapshot:
    """The newest (successful, by default) snapshot of device ``name``; NotFound with a remedy."""
    device = get_device(session, name)
    query = select(ProbeSnapshot).where(ProbeSnapshot.device_id == device.id)
    if ok_only:
        query = query.where(ProbeSnapshot.ok == True)  # noqa: E712 - SQL expression
    snap = session.exec(query.order_by(col(ProbeSnapshot.taken_at).desc(), col(ProbeSnapshot.id).desc())).first()
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
