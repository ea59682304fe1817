"""The qualification matrix as it is shown: 60 cells, each with its evidence runs resolved and
judged real or virtual, so no view can show a virtual-only cell as qualified."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import Engine

from edgelab.store.db import session_scope


@dataclass(frozen=True)
class EvidenceRun:
    """A run a matrix cell cites; ``virtual`` when the run or its device is virtual."""

    id: str
    device: str | None
    pipeline: str | None
    state: str  # a run state, or "missing" when the row is gone
    virtual: bool
    created_at: datetime | None
    demo: bool  # kept as demonstration evidence only (cell.demo_evidence)


@dataclass(frozen=True)
class MatrixCellView:
    """One cell of the qualification matrix as the matrix views show it.

    ``qualified`` is true only when the stage says so AND a real-device run backs it;
    ``virtual_only`` marks cells whose every cited run is virtual (shown "(v)").
    """

    id: str
    row: int
    row_key: str
    row_label: str
    col: int
    pipeline: str
    col_label: str
    stage: str
    functional: str | None
    performance: str | None
    failing_layer: str | None
    reason: str | None
    next_experiment: str | None
    evidence: tuple[EvidenceRun, ...]
    blocker_kind: str | None
    updated_at: datetime | None
    updated_by: str | None
    virtual_only: bool
    qualified: bool


def _evidence_runs(session, ids: set[str]) -> dict[str, EvidenceRun]:
    """run id -> EvidenceRun (without the demo flag), virtual judged by run and device."""
    from edgelab.store.devices import virtual_names
    from edgelab.store.runs import runs_by_id

    runs = runs_by_id(session, ids)
    virtual_devices = virtual_names(session, {r.device_name for r in runs.values() if r.device_name})
    return {
        r.id: EvidenceRun(
            id=r.id,
            device=r.device_name,
            pipeline=r.pipeline,
            state=r.state,
            virtual=bool(r.virtual) or r.device_name in virtual_devices,
            created_at=r.created_at,
            demo=False,
        )
        for r in runs.values()
    }


def load_matrix(engine: Engine) -> list[MatrixCellView]:
    """The 60 cells ordered by row then column, each with its evidence runs resolved.

    Seeds the study's 12 x 5 layout first when the table is empty (as `edgelab matrix` does).
    A run id that no longer resolves is listed with state "missing" and counts as not real.
    """
    from edgelab.matrix import matrix_rows
    from edgelab.store.matrix import list_cells

    with session_scope(engine, write=False) as s:
        cells = list_cells(s)
    if not cells:
        with session_scope(engine) as s:
            cells = matrix_rows(s)
    with session_scope(engine, write=False) as s:
        runs = _evidence_runs(s, {r for c in cells for r in [*c.evidence, *c.demo_evidence]})
    out = []
    for c in cells:
        ev: list[EvidenceRun] = []
        for rid, demo in [*((r, False) for r in c.evidence), *((r, True) for r in c.demo_evidence)]:
            run = runs.get(rid)
            if run is None:
                run = EvidenceRun(
                    id=rid,
                    device=None,
                    pipeline=None,
                    state="missing",
                    virtual=False,
                    created_at=None,
                    demo=demo,
                )
            ev.append(replace(run, demo=demo))
        real = [e for e in ev if not e.virtual and not e.demo and e.state != "missing"]
        out.append(
            MatrixCellView(
                id=c.id,
                row=c.row,
                row_key=c.row_key,
                row_label=c.row_label,
                col=c.col,
                pipeline=c.pipeline,
                col_label=c.col_label,
                stage=c.stage,
                functional=c.functional,
                performance=c.performance,
                failing_layer=c.failing_layer,
                reason=c.reason,
                next_experiment=c.next_experiment,
                evidence=tuple(ev),
                blocker_kind=c.blocker_kind,
                updated_at=c.updated_at,
                updated_by=c.updated_by,
                virtual_only=bool(ev) and not real and any(e.virtual for e in ev),
                qualified=c.stage == "qualified" and bool(real),
            )
        )
    return out


@dataclass(frozen=True)
class CellWords:
    """What a matrix cell says in a grid, before any colour: two lines and the words that tone them.

    ``tone`` is a status word or stage name, or "qualified" (backed by a real-device run) or
    "unproven" (a qualified stage no real-device run backs); ``virtual`` asks for the "(v)" mark.
    """

    first: str
    tone: str | None
    second: str
    second_tone: str | None
    second_is_performance: bool
    virtual: bool


def stage_label(cell: MatrixCellView) -> str:
    """The stage as it may be shown: "qualified" only with a real-device run behind it."""
    if cell.stage == "qualified" and not cell.qualified:
        return "qualified? (no real-device run)"
    return cell.stage


def cell_words(cell: MatrixCellView) -> CellWords:
    """Line 1: functional status (or the stage reached); line 2: performance status, or the stage
    when both a functional word and a stage exist; a blocker's layer and kind; an open cell's
    "next step" (``edgelab matrix next`` says which). Never "qualified" without a real-device run."""
    if cell.stage in ("blocked", "rejected"):
        kind = {"feasibility": "feas.", "implementation": "impl."}.get(cell.blocker_kind or "", "")
        first = cell.functional or cell.stage.upper()
        second = " ".join(x for x in (cell.failing_layer, kind) if x)
        return CellWords(first, cell.stage, second, None, False, cell.virtual_only)
    if cell.stage == "none" and not cell.functional and cell.next_experiment:
        return CellWords("open", "none", "next step", None, False, cell.virtual_only)
    if cell.qualified:
        first, tone = f"* {cell.functional or 'qualified'}", "qualified"
    elif cell.stage == "qualified":
        first, tone = "unproven", "unproven"
    elif cell.functional:
        first, tone = cell.functional, cell.functional
    else:
        first, tone = ("-" if cell.stage == "none" else cell.stage), cell.stage
    if cell.performance:
        second, second_tone, perf = cell.performance, cell.performance, True
    elif cell.functional and cell.stage != "none":
        second, second_tone, perf = stage_label(cell).split(" ")[0], None, False
    else:
        second, second_tone, perf = "", None, False
    return CellWords(first, tone, second, second_tone, perf, cell.virtual_only)
