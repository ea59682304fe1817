"""run: the owner process (pid, host, start time) that drives it; deployment: the to_stop mark.

A run whose owner process is gone can be proven so by another command (same host: no such pid,
or a pid with another start time), which then reaps what it left: the reservation, a pending
deployment, remote processes. A deployment marked ``to_stop`` keeps its reservation until its
processes are seen gone.

Revision ID: 0009_faults_run_owner
Revises: 0008_evidence_telemetry_raw
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_faults_run_owner"
down_revision = "0008_evidence_telemetry_raw"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.add_column(sa.Column("owner_pid", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("owner_host", sa.String(length=255), nullable=True))
        batch.add_column(sa.Column("owner_start", sa.String(length=64), nullable=True))
    with op.batch_alter_table("deployment") as batch:
        batch.add_column(sa.Column("to_stop", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("deployment") as batch:
        batch.drop_column("to_stop")
    with op.batch_alter_table("run") as batch:
        batch.drop_column("owner_start")
        batch.drop_column("owner_host")
        batch.drop_column("owner_pid")
