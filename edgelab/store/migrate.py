"""Schema migrations (Alembic), run programmatically from the package: no alembic.ini at runtime."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, text

from edgelab.errors import ConfigError, EdgelabError
from edgelab.store.schema import scanned_head

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def alembic_config() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return _head(ScriptDirectory.from_config(alembic_config()))


def _head(script: ScriptDirectory) -> str:
    head = script.get_current_head()
    if head is None:  # no migration files: a broken install, not the operator's input
        raise EdgelabError("this edgelab ships no schema migrations", remedy="reinstall edgelab")
    return head


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` inside one locked transaction, so racing processes migrate once."""
    if revision == "head" and _at_scanned_head(engine):
        return
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    cfg = alembic_config()
    script = ScriptDirectory.from_config(cfg)
    target = _head(script) if revision == "head" else revision
    with engine.begin() as conn:  # SQLite: BEGIN IMMEDIATE, i.e. the write lock
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(7150451)"))
        current = MigrationContext.configure(conn).get_current_revision()
        if current == target:
            return
        if current is not None and current not in {s.revision for s in script.walk_revisions()}:
            raise ConfigError(
                f"the database schema is at revision {current}, which this edgelab does not know",
                remedy="upgrade edgelab to the version that wrote this database, or use another --db",
            )
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, target)


def _at_scanned_head(engine: Engine) -> bool:
    """A read of ``alembic_version``: already at the shipped head means no Alembic import at all."""
    head = scanned_head()
    if head is None:
        return False
    try:
        with engine.execution_options(edgelab_begin="BEGIN").connect() as conn:  # a read, not the write lock
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).fetchall()
    except Exception:  # no table yet, or a database we cannot read this way: let Alembic decide
        return False
    return [r[0] for r in rows] == [head]
