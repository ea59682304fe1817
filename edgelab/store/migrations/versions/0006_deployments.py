"""Deployments: deployment (one per deploy run), deployment_process, reservation, deploy_attempt.

Revision ID: 0006
Revises: 0005
Create Date: 2025-01-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    ts = sa.DateTime(timezone=True)
    op.create_table(
        "deployment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("device_name", sa.String(length=64), nullable=False),
        sa.Column("pipeline", sa.String(length=64), nullable=False),
        sa.Column("strategy", sa.String(length=8), nullable=False),
        sa.Column("runtime", sa.String(length=32), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("admission", sa.JSON(), nullable=False),
        sa.Column("phases", sa.JSON(), nullable=False),
        sa.Column("placement", sa.JSON(), nullable=False),
        sa.Column("logs", sa.JSON(), nullable=False),
        sa.Column("remote_dir", sa.String(length=512), nullable=False),
        sa.Column("facts_hash", sa.String(length=64), nullable=True),
        sa.Column("virtual", sa.Boolean(), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=True),
        sa.Column("created_at", ts, nullable=False),
        sa.Column("started_at", ts, nullable=True),
        sa.Column("ended_at", ts, nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["device_id"], ["device.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", name="uq_deployment_run_id"),
    )
    op.create_index("ix_deployment_device_state", "deployment", ["device_id", "state"])
    op.create_table(
        "deployment_process",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("deployment_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("argv", sa.JSON(), nullable=False),
        sa.Column("workdir", sa.String(length=512), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("started_at", ts, nullable=True),
        sa.Column("stopped_at", ts, nullable=True),
        sa.ForeignKeyConstraint(["deployment_id"], ["deployment.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_deployment_process_deployment_id", "deployment_process", ["deployment_id"])
    op.create_table(
        "reservation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("deployment_id", sa.Integer(), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("pool", sa.String(length=64), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("capacity", sa.BigInteger(), nullable=False),
        sa.Column("created_at", ts, nullable=False),
        sa.Column("released_at", ts, nullable=True),
        sa.ForeignKeyConstraint(["deployment_id"], ["deployment.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["device_id"], ["device.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_reservation_deployment_id", "reservation", ["deployment_id"])
    op.create_index("ix_reservation_device_open", "reservation", ["device_id", "released_at"])
    op.create_table(
        "deploy_attempt",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("device_name", sa.String(length=64), nullable=False),
        sa.Column("pipeline", sa.String(length=64), nullable=False),
        sa.Column("strategy", sa.String(length=8), nullable=True),
        sa.Column("runtime", sa.String(length=32), nullable=True),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("code", sa.String(length=32), nullable=True),
        sa.Column("pool", sa.String(length=64), nullable=True),
        sa.Column("message", sa.String(), nullable=True),
        sa.Column("remedy", sa.String(), nullable=True),
        sa.Column("numbers", sa.JSON(), nullable=False),
        sa.Column("deployment_id", sa.Integer(), nullable=True),
        sa.Column("created_at", ts, nullable=False),
        sa.ForeignKeyConstraint(["deployment_id"], ["deployment.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_deploy_attempt_device_name", "deploy_attempt", ["device_name"])


def downgrade() -> None:
    op.drop_index("ix_deploy_attempt_device_name", table_name="deploy_attempt")
    op.drop_table("deploy_attempt")
    op.drop_index("ix_reservation_device_open", table_name="reservation")
    op.drop_index("ix_reservation_deployment_id", table_name="reservation")
    op.drop_table("reservation")
    op.drop_index("ix_deployment_process_deployment_id", table_name="deployment_process")
    op.drop_table("deployment_process")
    op.drop_index("ix_deployment_device_state", table_name="deployment")
    op.drop_table("deployment")
