"""Artifact registry, local hash cache and device store entries.

Revision ID: 0004
Revises: 0003
Create Date: 2025-01-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "artifact",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("target", sa.String(length=64), nullable=False),
        sa.Column("component", sa.String(length=128), nullable=True),
        sa.Column("total_size", sa.BigInteger(), nullable=False),
        sa.Column("provenance", sa.JSON(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("validation", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name", name="uq_artifact_name"),
    )
    op.create_index("ix_artifact_digest", "artifact", ["digest"])
    op.create_index("ix_artifact_target", "artifact", ["target"])
    op.create_table(
        "artifact_file",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("artifact_id", sa.Integer(), nullable=False),
        sa.Column("path", sa.String(length=512), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=4096), nullable=True),
        sa.ForeignKeyConstraint(["artifact_id"], ["artifact.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("artifact_id", "path", name="uq_artifact_file_path"),
    )
    op.create_index("ix_artifact_file_sha256", "artifact_file", ["sha256"])
    op.create_table(
        "hash_cache",
        sa.Column("path", sa.String(length=4096), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("mtime_ns", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("hashed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("path"),
    )
    op.create_table(
        "device_store_entry",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("stamp", sa.String(length=128), nullable=True),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["device_id"], ["device.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("device_id", "sha256", name="uq_device_store_entry"),
    )
    op.create_index("ix_device_store_entry_sha256", "device_store_entry", ["sha256"])


def downgrade() -> None:
    op.drop_index("ix_device_store_entry_sha256", table_name="device_store_entry")
    op.drop_table("device_store_entry")
    op.drop_table("hash_cache")
    op.drop_index("ix_artifact_file_sha256", table_name="artifact_file")
    op.drop_table("artifact_file")
    op.drop_index("ix_artifact_target", table_name="artifact")
    op.drop_index("ix_artifact_digest", table_name="artifact")
    op.drop_table("artifact")
