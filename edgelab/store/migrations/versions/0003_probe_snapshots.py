"""The probe_snapshot table: each probe's raw outputs, facts, hash and classification.

Revision ID: 0003
Revises: 0002
Create Date: 2025-01-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "probe_snapshot",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("device_name", sa.String(length=64), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("edgelab_version", sa.String(length=32), nullable=False),
        sa.Column("family", sa.String(length=16), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("raw", sa.JSON(), nullable=False),
        sa.Column("facts", sa.JSON(), nullable=True),
        sa.Column("facts_hash", sa.String(length=64), nullable=True),
        sa.Column("device_class", sa.String(length=32), nullable=True),
        sa.Column("catalog_entry", sa.String(length=64), nullable=True),
        sa.Column("classification", sa.JSON(), nullable=True),
        sa.Column("warnings", sa.JSON(), nullable=False),
        sa.Column("virtual", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["device_id"], ["device.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_probe_snapshot_device_taken", "probe_snapshot", ["device_id", "taken_at"])


def downgrade() -> None:
    op.drop_index("ix_probe_snapshot_device_taken", table_name="probe_snapshot")
    op.drop_table("probe_snapshot")
