"""Schema migrations (Alembic), run programmatically from the package: no alembic.ini at runtime."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

from edgelab.errors import ConfigError

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` inside one locked transaction, so racing processes migrate once."""
    cfg = alembic_config()
    script = ScriptDirectory.from_config(cfg)
    target = script.get_current_head() if revision == "head" else revision
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
