"""Qualification-matrix tables: one row per cell (pipeline x device configuration) and its history.

The cell row holds the current state; every change is also appended to ``matrix_change`` with
who/what made it and the evidence (run ids), so the ledger the study kept by hand is auditable.
Owned by edgelab.matrix; migration 0007 creates the tables, 0011 adds a blocker's kind and evidence.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Column, ForeignKey, Index, Integer, String
from sqlmodel import Field, Session, SQLModel, col, select

from edgelab.errors import NotFound
from edgelab.store.base import _ts, utcnow


class MatrixCell(SQLModel, table=True):
    """One cell: where it stands on the ladder, functional and performance status kept apart."""

    __tablename__ = "matrix_cell"
    __table_args__ = (Index("ix_matrix_cell_row_col", "row", "col"),)

    id: str = Field(sa_column=Column(String(96), primary_key=True))  # "<row_key>/<pipeline>"
    row: int = Field(sa_column=Column(Integer, nullable=False))  # 1-12 (DESIGN §6)
    row_key: str = Field(max_length=64)  # catalog entry id of the row
    row_label: str = Field(max_length=128)
    col: int = Field(sa_column=Column(Integer, nullable=False))  # 1-5
    pipeline: str = Field(max_length=64)  # pipeline spec id of the column
    col_label: str = Field(max_length=128)
    stage: str = Field(
        default="none", max_length=24
    )  # none|artifact_ready|correct|executes|profiled|qualified|blocked|rejected
    functional: str | None = Field(
        default=None, max_length=16
    )  # PASS|PARTIAL|COMPONENT|PROFILE_ONLY|FAILED|REJECTED|BLOCKED
    performance: str | None = Field(default=None, max_length=16)
    failing_layer: str | None = Field(default=None, max_length=32)
    reason: str | None = None
    next_experiment: str | None = None
    evidence: list[str] = Field(
        default_factory=list, sa_column=Column(JSON, nullable=False)
    )  # run ids (real)
    demo_evidence: list[str] = Field(
        default_factory=list, sa_column=Column(JSON, nullable=False)
    )  # virtual runs
    updated_at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))
    updated_by: str | None = Field(default=None, max_length=64)  # "seed" | "manual" | "play:<name>" | "lab"
    # a blocked or rejected cell: is it the device's (feasibility) or edgelab's/the lab's to build
    # (implementation), and what showed it (the profile's refusal, a plan's, with its numbers)
    blocker_kind: str | None = Field(default=None, max_length=16)  # feasibility | implementation
    blocker_evidence: dict | None = Field(default=None, sa_column=Column(JSON, nullable=True))


class MatrixChange(SQLModel, table=True):
    """One change of one cell, kept forever: the cell's history."""

    __tablename__ = "matrix_change"
    __table_args__ = (Index("ix_matrix_change_cell", "cell_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    cell_id: str = Field(
        sa_column=Column(String(96), ForeignKey("matrix_cell.id", ondelete="CASCADE"), nullable=False)
    )
    at: datetime = Field(default_factory=utcnow, sa_column=_ts(nullable=False))
    source: str | None = Field(default=None, max_length=64)
    before: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    after: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    evidence: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    note: str | None = None


def list_cells(session: Session) -> list[MatrixCell]:
    return list(session.exec(select(MatrixCell).order_by(col(MatrixCell.row), col(MatrixCell.col))).all())


def get_cell(session: Session, cell_id: str) -> MatrixCell:
    cell = session.get(MatrixCell, cell_id)
    if cell is None:
        raise NotFound(f"no matrix cell {cell_id!r}", remedy="list the cells with: edgelab matrix")
    return cell


def history(session: Session, cell_id: str) -> list[MatrixChange]:
    q = select(MatrixChange).where(MatrixChange.cell_id == cell_id).order_by(col(MatrixChange.id))
    return list(session.exec(q).all())
