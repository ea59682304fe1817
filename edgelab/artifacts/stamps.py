"""Verifications of device blobs kept in the database (device_store_entry), per device."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlmodel import select

from edgelab.store.artifacts import DeviceStoreEntry
from edgelab.store.db import session_scope
from edgelab.store.models import utcnow


class DbStamps:
    """The ``Stamps`` of one device, read and written in short transactions (safe across threads)."""

    def __init__(self, engine: Engine, device_id: int):
        self.engine = engine
        self.device_id = device_id

    def _row(self, session, sha: str) -> DeviceStoreEntry | None:
        q = select(DeviceStoreEntry).where(
            DeviceStoreEntry.device_id == self.device_id, DeviceStoreEntry.sha256 == sha
        )
        return session.exec(q).first()

    def get(self, sha: str) -> tuple[int, str | None] | None:
        with session_scope(self.engine, write=False) as s:
            row = self._row(s, sha)
            return (row.size, row.stamp) if row else None

    def put(self, sha: str, size: int, stamp: str | None) -> None:
        with session_scope(self.engine) as s:
            row = self._row(s, sha) or DeviceStoreEntry(device_id=self.device_id, sha256=sha)
            row.size, row.stamp, row.verified_at = size, stamp, utcnow()
            s.add(row)

    def drop(self, sha: str) -> None:
        with session_scope(self.engine) as s:
            row = self._row(s, sha)
            if row is not None:
                s.delete(row)

    def all(self) -> dict[str, DeviceStoreEntry]:
        with session_scope(self.engine, write=False) as s:
            q = select(DeviceStoreEntry).where(DeviceStoreEntry.device_id == self.device_id)
            return {r.sha256: r for r in s.exec(q).all()}
