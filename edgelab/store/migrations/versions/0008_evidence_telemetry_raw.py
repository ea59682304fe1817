"""telemetry_sample: the virtual flag and every other field a sampler gave (raw).

Revision ID: 0008_evidence_telemetry_raw
Revises: 0008_leases_leases
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_evidence_telemetry_raw"
down_revision = "0008_leases_leases"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("telemetry_sample") as batch:
        batch.add_column(sa.Column("virtual", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("raw", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("telemetry_sample") as batch:
        batch.drop_column("raw")
        batch.drop_column("virtual")
