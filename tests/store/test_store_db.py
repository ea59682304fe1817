"""The database layer against real SQLite files: migrations, WAL, several writer processes at once."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from datetime import UTC, datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlmodel import SQLModel

import edgelab.store.tables  # noqa: F401 - the whole schema on SQLModel.metadata, compared with the migrations
from edgelab.errors import ConfigError
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import add_device, list_devices
from edgelab.store.migrate import current_revision, head_revision, migrate
from edgelab.store.models import Device


@pytest.fixture(autouse=True)
def _fresh_engines():
    dbmod.dispose_engines()
    yield
    dbmod.dispose_engines()


def _diff(url: str) -> list:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return compare_metadata(
                MigrationContext.configure(conn, opts={"compare_type": True}), SQLModel.metadata
            )
    finally:
        engine.dispose()


def test_empty_db_migrates_to_exactly_the_models(db_url):
    url = db_url
    engine = get_engine(url)
    assert current_revision(engine) == head_revision()
    assert _diff(url) == []
    cols = {c["name"] for c in inspect(engine).get_columns("device")}
    assert cols == {c.name for c in Device.__table__.columns}
    assert "alembic_version" in inspect(engine).get_table_names()


def test_sqlite_is_wal_with_busy_timeout_and_foreign_keys(tmp_path):
    engine = get_engine(str(tmp_path / "lab.db"))  # a bare path means SQLite
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_db_at_older_revision_upgrades_and_keeps_rows(db_url):
    url = db_url
    old = dbmod._create(url)
    migrate(old, "0001")
    assert current_revision(old) == "0001"
    pg = old.dialect.name == "postgresql"
    old.dispose()
    assert _diff(url) != []  # 0001 lacks the class index: the comparison does see differences
    false, ts = ("false", "'2024-01-01 00:00:00+00'") if pg else ("0", "'2024-01-01 00:00:00'")
    plain = create_engine(url)
    with plain.begin() as con:
        con.execute(
            text(
                "INSERT INTO device (name, transport, ssh_host, shell, tags, notes, state, virtual, created_at, updated_at)"
                f" VALUES ('keepme', 'ssh', 'h', 'posix', '[]', '', 'unknown', {false}, {ts}, {ts})"
            )
        )
    plain.dispose()

    engine = get_engine(url)
    assert current_revision(engine) == head_revision()
    assert _diff(url) == []
    with session_scope(engine, write=False) as s:
        [row] = list_devices(s)
    assert row.name == "keepme"
    assert row.created_at == datetime(2024, 1, 1, tzinfo=UTC)


def test_unknown_newer_revision_is_refused(tmp_path):
    path = tmp_path / "future.db"
    get_engine(str(path))
    dbmod.dispose_engines()
    con = sqlite3.connect(path)
    con.execute("UPDATE alembic_version SET version_num = 'zz99'")
    con.commit()
    con.close()
    with pytest.raises(ConfigError) as err:
        get_engine(str(path))
    assert "zz99" in str(err.value) and err.value.remedy


def test_session_scope_rolls_back_on_error(db_url):
    engine = get_engine(db_url)
    with pytest.raises(RuntimeError):
        with session_scope(engine) as s:
            add_device(s, Device(name="ghost", transport="ssh", ssh_host="h"))
            raise RuntimeError("boom")
    with session_scope(engine) as s:
        assert list_devices(s) == []


def test_in_memory_sqlite_works(tmp_path):
    engine = get_engine("sqlite://")
    with session_scope(engine) as s:
        add_device(s, Device(name="m", transport="local"))
    with session_scope(engine) as s:
        assert [d.name for d in list_devices(s)] == ["m"]


def test_bad_url_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        get_engine("nosuchdialect://x/y")
    assert err.value.remedy


def _writer(url: str, worker: int, rows: int, barrier, dup_results) -> None:
    dbmod.dispose_engines()
    barrier.wait()
    engine = get_engine(url)  # every worker races the migration of a fresh file too
    for i in range(rows):
        with session_scope(engine) as s:
            add_device(s, Device(name=f"w{worker}-d{i:02d}", transport="ssh", ssh_host=f"10.0.{worker}.{i}"))
    try:
        with session_scope(engine) as s:
            add_device(s, Device(name="contested", transport="ssh", ssh_host=f"h{worker}"))
        dup_results.put("won")
    except ConfigError:
        dup_results.put("refused")


def test_four_processes_add_devices_without_losing_a_row(db_url):
    url = db_url
    ctx = mp.get_context("fork")
    workers, rows = 4, 25
    barrier = ctx.Barrier(workers)
    results = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, w, rows, barrier, results)) for w in range(workers)]
    try:
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        assert [p.exitcode for p in procs] == [0] * workers
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    outcomes = sorted(results.get(timeout=5) for _ in range(workers))
    assert outcomes == ["refused"] * (workers - 1) + ["won"]
    engine = get_engine(url)
    with session_scope(engine, write=False) as s:
        names = {d.name for d in list_devices(s)}
    assert len(names) == workers * rows + 1
    assert names >= {f"w{w}-d{i:02d}" for w in range(workers) for i in range(rows)}


def test_sqlite_path_with_tilde_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    engine = get_engine("~/nested/dir/lab.db")
    assert engine.url.database == str(tmp_path / "nested" / "dir" / "lab.db")
    assert (tmp_path / "nested" / "dir" / "lab.db").exists()
