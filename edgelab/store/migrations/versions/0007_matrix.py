"""Qualification matrix: matrix_cell and matrix_change.

Revision ID: 0007
Revises: 0006
Create Date: 2025-01-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    ts = sa.DateTime(timezone=True)
    op.create_table(
        "matrix_cell",
        sa.Column("id", sa.String(length=96), nullable=False),
        sa.Column("row", sa.Integer(), nullable=False),
        sa.Column("row_key", sa.String(length=64), nullable=False),
        sa.Column("row_label", sa.String(length=128), nullable=False),
        sa.Column("col", sa.Integer(), nullable=False),
        sa.Column("pipeline", sa.String(length=64), nullable=False),
        sa.Column("col_label", sa.String(length=128), nullable=False),
        sa.Column("stage", sa.String(length=24), nullable=False),
        sa.Column("functional", sa.String(length=16), nullable=True),
        sa.Column("performance", sa.String(length=16), nullable=True),
        sa.Column("failing_layer", sa.String(length=32), nullable=True),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column("next_experiment", sa.String(), nullable=True),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("demo_evidence", sa.JSON(), nullable=False),
        sa.Column("updated_at", ts, nullable=False),
        sa.Column("updated_by", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_matrix_cell_row_col", "matrix_cell", ["row", "col"])
    op.create_table(
        "matrix_change",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cell_id", sa.String(length=96), nullable=False),
        sa.Column("at", ts, nullable=False),
        sa.Column("source", sa.String(length=64), nullable=True),
        sa.Column("before", sa.JSON(), nullable=False),
        sa.Column("after", sa.JSON(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("note", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(["cell_id"], ["matrix_cell.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_matrix_change_cell", "matrix_change", ["cell_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_matrix_change_cell", table_name="matrix_change")
    op.drop_table("matrix_change")
    op.drop_index("ix_matrix_cell_row_col", table_name="matrix_cell")
    op.drop_table("matrix_cell")
