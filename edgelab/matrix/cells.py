"""Cells of the matrix: seed, look up, change by hand, and update from playbook outcomes.

Every change appends a MatrixChange row (who, when, which runs, before and after). Evidence
is a list of run ids; a run on a virtual device demonstrates the machinery and never qualifies
a cell: it is kept apart (demo_evidence) and a request to qualify from it is refused with the
run and device named. A move to ``profiled`` or ``qualified`` also needs every evidence run to
pass :mod:`edgelab.matrix.evidence` (right row and column, real runtime and weights, the
protocol's counts, complete provenance); a refusal names each failing condition.
"""

from __future__ import annotations

import re
from typing import Any

from sqlmodel import Session, select

from edgelab.errors import ConfigError, NotFound, VirtualEvidence
from edgelab.matrix import ladder
from edgelab.matrix.evidence import judge, require
from edgelab.matrix.layout import COLUMNS, ROWS, cell_id, column_by, row_by
from edgelab.states import RunState
from edgelab.store.matrix import MatrixCell, MatrixChange, get_cell, list_cells
from edgelab.store.models import Device, utcnow
from edgelab.store.runs import get_run

_FIELDS = (
    "stage",
    "functional",
    "performance",
    "failing_layer",
    "reason",
    "next_experiment",
    "blocker_kind",
    "evidence",
)


def seed_matrix(session: Session) -> int:
    """Create the 60 cells (12 rows x 5 columns) that do not exist yet; returns how many were added."""
    added = 0
    for r in ROWS:
        for c in COLUMNS:
            cid = cell_id(r.key, c.key)
            if session.get(MatrixCell, cid) is not None:
                continue
            session.add(
                MatrixCell(
                    id=cid,
                    row=r.index,
                    row_key=r.key,
                    row_label=r.label,
                    col=c.index,
                    pipeline=c.key,
                    col_label=c.label,
                    stage="none",
                    updated_by="seed",
                    updated_at=utcnow(),
                )
            )
            added += 1
    session.flush()
    return added


def matrix_rows(session: Session) -> list[MatrixCell]:
    """Every cell, seeding the matrix first when the table is empty."""
    cells = list_cells(session)
    if not cells:
        seed_matrix(session)
        cells = list_cells(session)
    return cells


_RC = re.compile(r"r?(\d+)[x/:c.,](\S+)", re.IGNORECASE)


def resolve_cell(session: Session, ref: str) -> MatrixCell:
    """A cell by id (``galaxy-s25/qwen3-tts-0.6b``), by numbers (``9/2``, ``r9c2``) or row/pipeline."""
    matrix_rows(session)
    cell = session.get(MatrixCell, ref)
    if cell is not None:
        return cell
    m = _RC.fullmatch(ref.strip())
    row = col = None
    if "/" in ref:
        a, b = ref.split("/", 1)
        row, col = row_by(a), column_by(b)
    elif m:
        row, col = row_by(m.group(1)), column_by(m.group(2))
    if row and col:
        return get_cell(session, cell_id(row.key, col.key))
    raise NotFound(
        f"no matrix cell {ref!r}",
        remedy="name a cell as ROW/PIPELINE, e.g. galaxy-s25/qwen3-tts-0.6b or 9/2 (see `edgelab matrix`)",
    )


def cell_snapshot(cell: MatrixCell) -> dict[str, Any]:
    return {f: (list(getattr(cell, f)) if f == "evidence" else getattr(cell, f)) for f in _FIELDS}


def _run_is_virtual(session: Session, run) -> tuple[bool, str]:
    if run.virtual:
        return True, run.device_name or "?"
    if run.device_name:
        dev = session.exec(select(Device).where(Device.name == run.device_name)).first()
        if dev is not None and dev.virtual:
            return True, dev.name
    return False, run.device_name or "?"


def _split_evidence(session: Session, run_ids: list[str]) -> tuple[list[str], list[tuple[str, str]], list]:
    """(real run ids, [(virtual run id, device)], run rows); unknown runs raise NotFound."""
    real, virtual, runs = [], [], []
    for ref in run_ids:
        run = get_run(session, ref)
        runs.append(run)
        is_virtual, dev = _run_is_virtual(session, run)
        (virtual.append((run.id, dev)) if is_virtual else real.append(run.id))
    return real, virtual, runs


def record_change(
    session: Session,
    cell: MatrixCell,
    before: dict,
    source: str,
    evidence: list[str],
    note: str | None,
    *,
    owner: bool = True,
) -> None:
    """Record one change in the cell's history; ``owner``: the source now owns the cell (its
    ``updated_by``), else the cell keeps the hand or playbook that decided it."""
    cell.updated_at = utcnow()
    if owner:
        cell.updated_by = source
    session.add(cell)
    session.add(
        MatrixChange(
            cell_id=cell.id,
            source=source,
            before=before,
            after=cell_snapshot(cell),
            evidence=list(evidence),
            note=note,
        )
    )
    session.flush()


def set_cell(
    session: Session,
    ref: str,
    *,
    status: str | None = None,
    performance: str | None = None,
    stage: str | None = None,
    evidence: list[str] | None = None,
    reason: str | None = None,
    layer: str | None = None,
    next_experiment: str | None = None,
    kind: str | None = None,
    source: str = "manual",
) -> tuple[MatrixCell, list[str]]:
    """Change a cell by hand (``edgelab matrix set``); returns the cell and notes for the operator.

    ``status`` is a functional status word or a stage name. A word above PARTIAL (PASS, functional
    or performance) needs a finished run on a real device of the cell as evidence; qualification
    too, and is refused outright when evidence is virtual. A blocked cell says its ``kind``
    (feasibility or implementation); a rejected one is a feasibility blocker (capacity).
    """
    cell = resolve_cell(session, ref)
    notes: list[str] = []
    if status and status.lower() in ladder.STAGES and stage is None:
        stage, status = status.lower(), None
    word = ladder.check_word(status)
    perf = ladder.check_word(performance, "performance status")
    target = (
        ladder.check_stage(stage)
        if stage
        else (ladder.stage_for_word(word, cell.stage) if word else cell.stage)
    )
    if word is None and target == "blocked":
        word = "BLOCKED"
    if word is None and target == "rejected":
        word = "REJECTED"
    kind = ladder.check_kind(kind)
    real, virtual, runs = _split_evidence(session, list(evidence or []))
    if target == "qualified":
        if virtual:
            rid, dev = virtual[0]
            raise VirtualEvidence(
                f"refusing to qualify {cell.id}: run {rid} ran on virtual device {dev}; "
                "a virtual run demonstrates the machinery and never qualifies a cell"
            )
        finished = [r for r in runs if r.state == RunState.FINISHED]
        if not finished and not cell.evidence:
            raise ConfigError(
                f"qualifying {cell.id} needs evidence: a finished run on a real device",
                remedy="add --evidence RUN (see `edgelab runs ls`)",
            )
        if (perf or cell.performance) != "PASS":
            raise ConfigError(
                f"qualifying {cell.id} needs performance status PASS",
                remedy="add --performance PASS once the profile meets its gates",
            )
    claimed = [w for w in (word, perf) if w in ladder.EVIDENCED_WORDS]
    # (a move to profiled or qualified is judged run by run below, with every failing condition named)
    if claimed and target not in ("profiled", "qualified") and not _backed(session, cell, real):
        raise ConfigError(
            f"{cell.id}: {claimed[0]} needs evidence: a finished run of {cell.pipeline} on a real device "
            f"of row {cell.row} ({cell.row_key})"
            + (f"; {', '.join(v for v, _ in virtual)} ran on a virtual device" if virtual else ""),
            remedy="add --evidence RUN (see `edgelab runs ls`; `edgelab matrix next` says how to make one)",
        )
    if target in ("profiled", "qualified") and (target != cell.stage or real):
        require(session, cell.id, cell.row_key, cell.pipeline, real or list(cell.evidence), target)
    if target == "rejected":
        kind = kind or "feasibility"  # capacity: the device cannot hold it
    ladder.check_transition(
        cell.stage,
        target,
        reason=reason or cell.reason,
        layer=layer or cell.failing_layer,
        next_experiment=next_experiment or cell.next_experiment,
        kind=kind or cell.blocker_kind,
    )
    before = cell_snapshot(cell)
    cell.stage = target
    if word:
        cell.functional = word
    if perf:
        cell.performance = perf
    if target not in ladder.ENDS:
        cell.failing_layer = None if target == "qualified" else cell.failing_layer
    for attr, value in (
        ("reason", reason),
        ("failing_layer", layer),
        ("next_experiment", next_experiment),
        ("blocker_kind", kind),
    ):
        if value is not None:
            setattr(cell, attr, value)
    if target not in ladder.ENDS:
        cell.blocker_kind = cell.blocker_evidence = None
    cell.evidence = list(dict.fromkeys([*cell.evidence, *real]))
    if virtual:
        cell.demo_evidence = list(dict.fromkeys([*cell.demo_evidence, *(v for v, _ in virtual)]))
        notes.append(
            f"{len(virtual)} virtual run(s) kept as demonstration evidence only "
            f"({', '.join(f'{r} on {d}' for r, d in virtual)})"
        )
    record_change(session, cell, before, source, [*real, *(v for v, _ in virtual)], reason)
    return cell, notes


def _backed(session: Session, cell: MatrixCell, new_real: list[str]) -> bool:
    """Whether a finished run on a real device, of this cell's pipeline, backs a claim on it."""
    for rid in [*new_real, *cell.evidence]:
        try:
            run = get_run(session, rid)
        except NotFound:
            continue
        col = column_by(run.pipeline or "")
        if (
            run.state == RunState.FINISHED
            and not _run_is_virtual(session, run)[0]
            and col
            and col.key == cell.pipeline
        ):
            return True
    return False


def record_outcome(
    session: Session,
    *,
    row_key: str,
    pipeline: str,
    run_ids: list[str],
    passed: bool,
    gated: bool,
    source: str,
    qualify: bool = False,
    failing_layer: str | None = None,
    reason: str | None = None,
) -> str:
    """Update a cell from one playbook job (a device x pipeline); returns a one-line note.

    Virtual runs only attach demonstration evidence. On a real device: a finished bench makes
    the functional status PASS (executes end to end); passing gates make performance PASS
    (profiled); ``qualify`` with everything passing qualifies it; a failure records FAILED.
    """
    row, col = row_by(row_key), column_by(pipeline)
    if row is None or col is None:
        return f"no matrix cell for {row_key} x {pipeline}"
    cell = resolve_cell(session, cell_id(row.key, col.key))
    real, virtual, _runs = _split_evidence(session, run_ids)
    before = cell_snapshot(cell)
    if virtual or not real:
        cell.demo_evidence = list(dict.fromkeys([*cell.demo_evidence, *(v for v, _ in virtual)]))
        record_change(
            session, cell, before, source, [v for v, _ in virtual], "virtual run: demonstration only"
        )
        return f"{cell.id}: unchanged (virtual device: demonstration evidence only, never qualifies)"
    cell.evidence = list(dict.fromkeys([*cell.evidence, *real]))
    refused = ""
    if passed:
        cell.functional = "PASS"
        target = "executes"
        if gated:
            wanted = "qualified" if qualify else "profiled"
            bad = [v for v in judge(session, real, cell.row_key, cell.pipeline) if not v.ok]
            if bad:  # functional PASS stands; the performance claim does not
                refused = f"; not {wanted}: " + "; ".join(
                    f"run {v.run}: {', '.join(v.failures)}" for v in bad
                )
                reason = (reason + " | " if reason else "") + refused[2:]
            else:
                cell.performance = "PASS"
                target = wanted
        if cell.stage in ladder.ENDS or ladder.rank(target) > ladder.rank(cell.stage):
            cell.stage = target
        cell.failing_layer = None
    else:
        if gated and failing_layer == "performance":
            cell.performance = "FAILED"
        else:
            cell.functional = "FAILED"
        cell.failing_layer = failing_layer
        cell.reason = reason
    record_change(session, cell, before, source, real, reason)
    return (
        f"{cell.id}: {cell.stage} (functional {cell.functional or '-'}, performance {cell.performance or '-'})"
        f"{refused}"
    )


def cell_dict(cell: MatrixCell) -> dict[str, Any]:
    return {
        "id": cell.id,
        "row": cell.row,
        "row_key": cell.row_key,
        "row_label": cell.row_label,
        "col": cell.col,
        "pipeline": cell.pipeline,
        "col_label": cell.col_label,
        "stage": cell.stage,
        "functional": cell.functional,
        "performance": cell.performance,
        "failing_layer": cell.failing_layer,
        "reason": cell.reason,
        "next_experiment": cell.next_experiment,
        "blocker_kind": cell.blocker_kind,
        "blocker_evidence": cell.blocker_evidence,
        "evidence": list(cell.evidence),
        "demo_evidence": list(cell.demo_evidence),
        "updated_at": cell.updated_at.isoformat() if cell.updated_at else None,
        "updated_by": cell.updated_by,
    }
