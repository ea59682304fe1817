"""Engine and sessions: SQLite by default (WAL, busy timeout), any SQLAlchemy URL, migrated on open.

Several processes (CLI calls, the TUI, CI jobs) share one database file, so every
SQLite write transaction starts with ``BEGIN IMMEDIATE``: writers queue on the busy
timeout instead of failing half-way, and no row is lost.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, InterfaceError, OperationalError
from sqlalchemy.pool import StaticPool
from sqlmodel import Session

from edgelab.config import db_url
from edgelab.errors import ConfigError
from edgelab.store.migrate import migrate

BUSY_TIMEOUT_S = 30.0
log = logging.getLogger(__name__)

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def get_engine(url: str | None = None) -> Engine:
    """The engine for ``url`` (``--db`` / ``EDGELAB_DB`` / ``./edgelab.db``), migrated to head once per process."""
    resolved = db_url(url)
    with _lock:
        engine = _engines.get(resolved)
        if engine is None:
            log.debug("opening database %s", _shown(resolved))
            engine = _create(resolved)
            try:
                migrate(engine)
            except (OperationalError, InterfaceError) as err:
                engine.dispose()
                raise ConfigError(
                    f"cannot open database {_shown(resolved)}: {err.orig or err}".splitlines()[0],
                    remedy="check --db / EDGELAB_DB: the file's directory must be writable, a server reachable",
                ) from err
            _engines[resolved] = engine
        return engine


def _shown(url: str) -> str:
    """``url`` as it may be printed: without its password."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(not a database URL)"


def dispose_engines() -> None:
    """Close every cached engine (tests, forked workers)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


@contextmanager
def session_scope(engine: Engine, *, write: bool = True) -> Iterator[Session]:
    """A session that commits on success and rolls back on error.

    ``write=False`` opens a deferred (read) transaction on SQLite so readers never
    queue behind writers; objects stay usable after the block (no expiry on commit).
    """
    bind = engine if write else engine.execution_options(edgelab_begin="BEGIN")
    session = Session(bind=bind, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def _create(url: str) -> Engine:
    try:
        parsed = make_url(url)
    except ArgumentError as err:
        raise ConfigError(
            f"not a database URL: {url!r}",
            remedy="use a SQLite path (./edgelab.db) or a URL such as postgresql+psycopg://user@host/db",
        ) from err
    if parsed.get_backend_name() != "sqlite":
        try:
            return create_engine(url, pool_pre_ping=True)
        except (ArgumentError, ImportError) as err:
            raise ConfigError(
                f"cannot open database {parsed.render_as_string(hide_password=True)}: {err}",
                remedy="check --db / EDGELAB_DB and that the database driver is installed",
            ) from err
    database = parsed.database or ""
    memory = database in ("", ":memory:") or database.startswith("file::memory:")
    kwargs: dict = {"connect_args": {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}}
    target: str | URL = url
    if memory:
        kwargs["poolclass"] = StaticPool
    else:
        path = Path(database).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigError(
                f"cannot create the database directory {path.parent}: {err.strerror}",
                remedy="give a --db path in a writable directory",
            ) from err
        target = parsed.set(database=str(path))
    engine = create_engine(target, **kwargs)
    _sqlite_events(engine, wal=not memory)
    return engine


def _ensure_wal(cur) -> None:
    """Switch the file to WAL once; racing first openers retry instead of failing.

    Changing the journal mode needs an exclusive lock, and SQLite may answer
    SQLITE_BUSY at once, without its busy handler, while another process
    migrates a fresh file. Once the file is in WAL the switch is a read.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            if cur.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) and "busy" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _sqlite_events(engine: Engine, *, wal: bool) -> None:
    """Pragmas per connection, and explicit BEGIN so transactions (and DDL) behave as documented."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # pragma: no cover - exercised via every test
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (pysqlite's is lazy and skips DDL)
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if wal:
            _ensure_wal(cur)
            cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        conn.exec_driver_sql(conn.get_execution_options().get("edgelab_begin", "BEGIN IMMEDIATE"))
