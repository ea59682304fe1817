"""The device table: how to reach each device of the lab, its state and its trusted host key.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "device",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("device_class", sa.String(length=32), nullable=True),
        sa.Column("transport", sa.String(length=8), nullable=False),
        sa.Column("ssh_user", sa.String(length=64), nullable=True),
        sa.Column("ssh_host", sa.String(length=255), nullable=True),
        sa.Column("ssh_port", sa.Integer(), nullable=True),
        sa.Column("ssh_jump", sa.String(length=255), nullable=True),
        sa.Column("shell", sa.String(length=16), nullable=False),
        sa.Column("adb_serial", sa.String(length=128), nullable=True),
        sa.Column("adb_server", sa.String(length=255), nullable=True),
        sa.Column("host_key_fingerprint", sa.String(length=128), nullable=True),
        sa.Column("host_key_type", sa.String(length=64), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("notes", sa.String(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("state_detail", sa.String(), nullable=True),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_checked", sa.DateTime(timezone=True), nullable=True),
        sa.Column("virtual", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name", name="uq_device_name"),
    )


def downgrade() -> None:
    op.drop_table("device")
