"""baseline: named sets of runs per device, pipeline, strategy and runtime, with who set them and when.

Revision ID: 0010_baselines
Revises: 0009_faults_run_owner
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_baselines"
down_revision = "0009_faults_run_owner"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "baseline",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("device", sa.String(length=64), nullable=False),
        sa.Column("pipeline", sa.String(length=64), nullable=False),
        sa.Column("strategy", sa.String(length=8), nullable=True),
        sa.Column("runtime", sa.String(length=64), nullable=True),
        sa.Column("runs", sa.JSON(), nullable=False),
        sa.Column("set_by", sa.String(length=200), nullable=False),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("note", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_baseline_name", "baseline", ["name", "id"])


def downgrade() -> None:
    op.drop_index("ix_baseline_name", table_name="baseline")
    op.drop_table("baseline")
