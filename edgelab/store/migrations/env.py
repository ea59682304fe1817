"""Alembic environment: always given a connection by edgelab.store.migrate (online mode only)."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import edgelab.store.tables  # noqa: F401 - registers every table on the metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only reachable through the alembic CLI
    raise RuntimeError("run migrations through edgelab.store.db.get_engine()")

context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",  # SQLite ALTERs via table copy
    transactional_ddl=True,
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
