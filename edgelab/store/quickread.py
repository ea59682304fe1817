"""Read-only listings straight from a SQLite file with the standard library.

SQLAlchemy, SQLModel and the table classes cost several times the CPU of a whole
``edgelab device ls``; a listing of a database already at the shipped schema head
needs none of them. Values are decoded by the column types SQLite reports (JSON,
BOOLEAN, DATETIME as written by ``UtcDateTime``), so a row reads as the ORM reads it.
Anything unusual (another backend, no file, another schema revision, a SQLite error)
answers ``None`` and the caller takes the ORM path, which also migrates.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote

from edgelab.config import db_url
from edgelab.store.schema import scanned_head

BUSY_TIMEOUT_S = 30.0


def _sqlite_path(url: str) -> Path | None:
    """The file of a plain ``sqlite:///PATH`` URL (no query options, not in memory), else ``None``."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or "?" in url:
        return None
    path = unquote(url[len(prefix) :])
    if path in ("", ":memory:") or path.startswith("file:"):
        return None
    return Path(path).expanduser()


def _decoder(decl: str):
    decl = (decl or "").upper()
    if decl == "JSON":
        return lambda v: None if v is None else json.loads(v)
    if decl == "BOOLEAN":
        return lambda v: None if v is None else bool(v)
    if decl in ("DATETIME", "TIMESTAMP"):
        return _utc
    return lambda v: v


def _utc(value):
    if value is None:
        return None
    parsed = datetime.fromisoformat(value)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def read_table(
    table: str, *, url: str | None = None, order_by: str = "name", unless: str | None = None
) -> tuple[list[str], list[SimpleNamespace]] | None:
    """Every row of ``table`` as attribute objects, with the column names in table order; ``None`` = use the ORM.

    ``unless``: a SELECT; when it returns a row, the answer is ``None`` too (a case for the domain code).
    """
    read = read_tables({table: order_by}, url=url, unless=unless)
    return None if read is None else read[table]


def read_tables(
    tables: dict[str, str], *, url: str | None = None, unless: str | None = None
) -> dict[str, tuple[list[str], list[SimpleNamespace]]] | None:
    """``read_table`` for several tables (name -> column to order by) in one connection and one
    read transaction: one open, one schema check, one consistent snapshot. ``None`` = use the ORM."""
    path = _sqlite_path(db_url(url))
    head = scanned_head()
    if path is None or head is None or not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error:
        return None
    raw: dict[str, tuple[list, list]] = {}
    try:
        conn.execute("BEGIN")  # every table from the same snapshot
        if [r[0] for r in conn.execute("SELECT version_num FROM alembic_version")] != [head]:
            return None
        if unless is not None and conn.execute(unless).fetchone() is not None:
            return None
        for table, order_by in tables.items():
            info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            if not info or order_by not in [c[1] for c in info]:
                return None
            raw[table] = (info, conn.execute(f'SELECT * FROM "{table}" ORDER BY "{order_by}"').fetchall())
    except (sqlite3.Error, ValueError):
        return None
    finally:
        conn.close()
    out = {}
    for table, (info, rows) in raw.items():
        columns = [c[1] for c in info]
        decoders = [_decoder(c[2]) for c in info]
        try:
            objects = [
                SimpleNamespace(**{c: dec(v) for c, dec, v in zip(columns, decoders, row, strict=True)})
                for row in rows
            ]
        except (ValueError, TypeError):
            return None
        out[table] = (columns, objects)
    return out


# a device held by an open lease: who holds it, and until when, is edgelab.lease's to say
ANY_LEASE_HELD = "SELECT 1 FROM lease_device WHERE held_key IS NOT NULL LIMIT 1"


def list_devices(
    *, url: str | None = None, tag: str | None = None, device_class: str | None = None, unleased: bool = False
) -> tuple[list[str], list[SimpleNamespace]] | None:
    """``edgelab.store.devices.list_devices`` without the ORM: same filter, same order (by name).

    ``unleased``: only when no device is under an open lease (else ``None``: the caller asks the ORM).
    """
    read = read_table("device", url=url, unless=ANY_LEASE_HELD if unleased else None)
    if read is None:
        return None
    columns, rows = read
    if device_class:
        rows = [d for d in rows if d.device_class == device_class]
    if tag:
        rows = [d for d in rows if tag in (d.tags or [])]
    return columns, rows
