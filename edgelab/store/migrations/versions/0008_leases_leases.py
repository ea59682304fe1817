"""Leases: lease, lease_device (one open lease per physical device), deployment.lease_id, bench reservations.

Revision ID: 0008_leases_leases
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_leases_leases"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    ts = sa.DateTime(timezone=True)
    op.create_table(
        "lease",
        sa.Column("id", sa.String(length=24), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("ci_job", sa.String(length=128), nullable=True),
        sa.Column("purpose", sa.String(length=255), nullable=False),
        sa.Column("auto", sa.Boolean(), nullable=False),
        sa.Column("users", sa.Integer(), nullable=False),
        sa.Column("ttl_s", sa.Float(), nullable=False),
        sa.Column("acquired_at", ts, nullable=False),
        sa.Column("heartbeat_at", ts, nullable=False),
        sa.Column("expires_at", ts, nullable=False),
        sa.Column("released_at", ts, nullable=True),
        sa.Column("end_reason", sa.String(length=16), nullable=True),
        sa.Column("ended_by", sa.String(length=255), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_lease_open", "lease", ["released_at", "expires_at"])
    op.create_table(
        "lease_device",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("lease_id", sa.String(length=24), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=True),
        sa.Column("device_name", sa.String(length=64), nullable=False),
        sa.Column("physical_key", sa.String(length=300), nullable=False),
        sa.Column("held_key", sa.String(length=300), nullable=True),
        sa.ForeignKeyConstraint(["lease_id"], ["lease.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["device_id"], ["device.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("held_key", name="uq_lease_device_held_key"),
    )
    op.create_index("ix_lease_device_lease_id", "lease_device", ["lease_id"])
    # The lease a deployment keeps while it runs (no FK: the column is added in place on SQLite).
    op.add_column("deployment", sa.Column("lease_id", sa.String(length=24), nullable=True))
    # Bench runs reserve memory too (no deployment row): the reservation names its run and lease.
    with op.batch_alter_table("reservation") as batch:
        batch.alter_column("deployment_id", existing_type=sa.Integer(), nullable=True)
        batch.add_column(sa.Column("run_id", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("lease_id", sa.String(length=24), nullable=True))


def downgrade() -> None:
    op.execute("DELETE FROM reservation WHERE deployment_id IS NULL")
    with op.batch_alter_table("reservation") as batch:
        batch.drop_column("lease_id")
        batch.drop_column("run_id")
        batch.alter_column("deployment_id", existing_type=sa.Integer(), nullable=False)
    with op.batch_alter_table("deployment") as batch:
        batch.drop_column("lease_id")
    op.drop_index("ix_lease_device_lease_id", table_name="lease_device")
    op.drop_table("lease_device")
    op.drop_index("ix_lease_open", table_name="lease")
    op.drop_table("lease")
