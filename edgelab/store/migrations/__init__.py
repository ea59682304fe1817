"""Alembic environment and revisions for the edgelab schema (run by edgelab.store.migrate)."""
