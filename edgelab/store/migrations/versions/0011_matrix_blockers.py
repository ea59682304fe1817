"""matrix_cell: a blocker's kind (feasibility or implementation) and its evidence.

A blocked or rejected cell says whether the device cannot (feasibility: capacity, a class no
runtime reaches) or the lab has not yet built what it needs (implementation: a runtime build, a
launch template, a model artifact), and what showed it (the profile's or a plan's refusal with its
code and numbers), so ``edgelab matrix fill`` records what the lab already knows.

Revision ID: 0011_matrix_blockers
Revises: 0010_baselines
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_matrix_blockers"
down_revision = "0010_baselines"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("matrix_cell") as batch:
        batch.add_column(sa.Column("blocker_kind", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("blocker_evidence", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("matrix_cell") as batch:
        batch.drop_column("blocker_evidence")
        batch.drop_column("blocker_kind")
