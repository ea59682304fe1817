"""Short writes straight into a SQLite file with the standard library: ``quickread``'s twin.

The fast paths (a fresh ``edgelab push`` to a free device) must not pay for SQLAlchemy, SQLModel
and the table classes, which cost more CPU than the whole push of a small file. Only a plain
SQLite file already at the shipped schema head is written here; anything else (another backend,
no file, another revision) answers ``None`` and the caller takes the ORM path, which also migrates.
Timestamps are written as ``UtcDateTime`` writes them on SQLite (naive UTC, microseconds), so the
ORM reads and compares them as its own.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from edgelab.config import db_url
from edgelab.store.quickread import BUSY_TIMEOUT_S, _sqlite_path
from edgelab.store.schema import scanned_head


def ts(value: datetime) -> str:
    """``value`` as the ORM stores a ``UtcDateTime`` in SQLite."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def connect(url: str | None = None) -> sqlite3.Connection | None:
    """A connection in autocommit mode (the caller says ``BEGIN IMMEDIATE``), or ``None`` = use the ORM."""
    path = _sqlite_path(db_url(url))
    head = scanned_head()
    if path is None or head is None or not path.is_file():
        return None
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    except sqlite3.Error:
        return None
    try:
        conn.execute("PRAGMA foreign_keys=ON")
        if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
            # as the ORM's connections (store.db): a commit is safe from a crash of the process without
            # an fsync of its own; only a power cut may lose the last ones, never the file's consistency
            conn.execute("PRAGMA synchronous=NORMAL")
        if [r[0] for r in conn.execute("SELECT version_num FROM alembic_version")] != [head]:
            conn.close()
            return None
    except sqlite3.Error:
        conn.close()
        return None
    return conn


def put_store_entries(
    conn: sqlite3.Connection, device_id: int, puts: list[tuple[str, int, str | None]], drops: list[str]
) -> None:
    """Record verified device blobs (``DbStamps.put``/``drop``) in one transaction."""
    now = ts(datetime.now(UTC))
    conn.execute("BEGIN IMMEDIATE")
    try:
        for sha in drops:
            conn.execute(
                "DELETE FROM device_store_entry WHERE device_id = ? AND sha256 = ?", (device_id, sha)
            )
        for sha, size, stamp in puts:
            conn.execute(
                "INSERT INTO device_store_entry (device_id, sha256, size, stamp, verified_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (device_id, sha256) DO UPDATE SET size = excluded.size, stamp = excluded.stamp, "
                "verified_at = excluded.verified_at",
                (device_id, sha, size, stamp, now),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
