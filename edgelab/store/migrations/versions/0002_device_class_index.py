"""Index device.device_class: `device ls --class` and the planner select devices by class.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_device_device_class", "device", ["device_class"])


def downgrade() -> None:
    op.drop_index("ix_device_device_class", table_name="device")
