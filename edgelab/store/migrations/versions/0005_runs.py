"""Runs and their evidence: run, run_request, run_sample, run_summary, telemetry_sample, run_log.

Revision ID: 0005
Revises: 0004
Create Date: 2025-01-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _run_fk(nullable: bool = False) -> sa.Column:
    return sa.Column("run_id", sa.String(length=32), nullable=nullable)


def _fk() -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["run_id"], ["run.id"], ondelete="CASCADE")


def upgrade() -> None:
    ts = sa.DateTime(timezone=True)
    op.create_table(
        "run",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("pipeline", sa.String(length=64), nullable=True),
        sa.Column("device_name", sa.String(length=64), nullable=True),
        sa.Column("runtime", sa.String(length=64), nullable=True),
        sa.Column("strategy", sa.String(length=8), nullable=True),
        sa.Column("profile", sa.String(length=64), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("virtual", sa.Boolean(), nullable=False),
        sa.Column("command", sa.String(), nullable=True),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("created_at", ts, nullable=False),
        sa.Column("started_at", ts, nullable=True),
        sa.Column("finished_at", ts, nullable=True),
        sa.Column("heartbeat_at", ts, nullable=True),
        sa.Column("provenance", sa.JSON(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_run_created", "run", ["created_at"])
    op.create_table(
        "run_request",
        sa.Column("id", sa.Integer(), nullable=False),
        _run_fk(),
        sa.Column("request", sa.String(length=128), nullable=False),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("band", sa.String(length=16), nullable=True),
        sa.Column("submitted", sa.Float(), nullable=False),
        sa.Column("finished", sa.Float(), nullable=True),
        sa.Column("ok", sa.Boolean(), nullable=True),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=True),
        _fk(),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "request", name="uq_run_request"),
    )
    op.create_table(
        "run_sample",
        sa.Column("id", sa.Integer(), nullable=False),
        _run_fk(),
        sa.Column("request", sa.String(length=128), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=True),
        sa.Column("t", sa.Float(), nullable=False),
        sa.Column("t_ms", sa.Float(), nullable=True),
        sa.Column("n", sa.Integer(), nullable=True),
        sa.Column("sample_rate", sa.Integer(), nullable=True),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("terminal", sa.Boolean(), nullable=True),
        sa.Column("obs_t", sa.Float(), nullable=True),
        sa.Column("infer_start", sa.Float(), nullable=True),
        sa.Column("infer_end", sa.Float(), nullable=True),
        sa.Column("horizon", sa.Integer(), nullable=True),
        sa.Column("dims", sa.Integer(), nullable=True),
        _fk(),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_run_sample_run_id", "run_sample", ["run_id", "id"])
    op.create_table(
        "run_summary",
        sa.Column("id", sa.Integer(), nullable=False),
        _run_fk(),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("computed_at", ts, nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("provenance", sa.JSON(), nullable=False),
        _fk(),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "kind", name="uq_run_summary_kind"),
    )
    op.create_table(
        "telemetry_sample",
        sa.Column("id", sa.Integer(), nullable=False),
        _run_fk(nullable=True),
        sa.Column("device_name", sa.String(length=64), nullable=True),
        sa.Column("t", sa.Float(), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=True),
        sa.Column("cpu_pct", sa.Float(), nullable=True),
        sa.Column("rss_bytes", sa.BigInteger(), nullable=True),
        sa.Column("mem_available_bytes", sa.BigInteger(), nullable=True),
        sa.Column("gpu_util_pct", sa.Float(), nullable=True),
        sa.Column("throttled", sa.Boolean(), nullable=True),
        sa.Column("temps_c", sa.JSON(), nullable=False),
        sa.Column("clocks_mhz", sa.JSON(), nullable=False),
        sa.Column("power_w", sa.JSON(), nullable=False),
        _fk(),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_telemetry_device_t", "telemetry_sample", ["device_name", "t"])
    op.create_index("ix_telemetry_run_t", "telemetry_sample", ["run_id", "t"])
    op.create_table(
        "run_log",
        sa.Column("id", sa.Integer(), nullable=False),
        _run_fk(),
        sa.Column("t", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("level", sa.String(length=16), nullable=True),
        sa.Column("request", sa.String(length=128), nullable=True),
        sa.Column("message", sa.String(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=True),
        _fk(),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_run_log_run_id", "run_log", ["run_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_run_log_run_id", table_name="run_log")
    op.drop_table("run_log")
    op.drop_index("ix_telemetry_run_t", table_name="telemetry_sample")
    op.drop_index("ix_telemetry_device_t", table_name="telemetry_sample")
    op.drop_table("telemetry_sample")
    op.drop_table("run_summary")
    op.drop_index("ix_run_sample_run_id", table_name="run_sample")
    op.drop_table("run_sample")
    op.drop_index("ix_run_created", table_name="run")
    op.drop_table("run")
