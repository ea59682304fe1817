"""Deleting runs with every row recorded for them, across the run, deployment and matrix tables.

Apart from ``runs`` because it reads the deployment and matrix tables, which refer to runs: kept
in ``runs`` it would import them back (an import cycle).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, update
from sqlmodel import Session, col, select

from edgelab.errors import ConfigError
from edgelab.store.baselines import current_baselines
from edgelab.store.deployments import ACTIVE_STATES, DeployAttempt, Deployment, DeploymentProcess, Reservation
from edgelab.store.matrix import MatrixCell
from edgelab.store.runs import (
    FINAL_STATES,
    Run,
    RunLog,
    RunRequest,
    RunSample,
    RunSummary,
    TelemetrySample,
    get_run,
)


def delete_runs(session: Session, refs: list[str], *, force: bool = False) -> list[dict[str, Any]]:
    """Delete runs and every row recorded for them (in the caller's transaction: all or none).

    Refused: a pending/running run or one cited as matrix evidence, unless ``force``; and always a
    run whose deployment is still live (deleting it would orphan processes on the device and the
    memory they hold). Returns what went: id, state, request and sample counts.
    """
    runs: list[Run] = []
    for ref in refs:
        run = get_run(session, ref)
        if run.id not in [r.id for r in runs]:
            runs.append(run)
    ids = [r.id for r in runs]
    deps = list(session.exec(select(Deployment).where(col(Deployment.run_id).in_(ids))).all())
    for d in deps:
        if d.state in ACTIVE_STATES:
            raise ConfigError(
                f"run {d.run_id} is deployed and {d.state} on {d.device_name}",
                remedy=f"stop it first: edgelab stop {d.run_id}",
            )
    for run in runs:
        if run.state not in FINAL_STATES and not force:
            raise ConfigError(f"run {run.id} is {run.state}", remedy="wait for it to end, or pass --force")
    cited: dict[str, str] = {}
    for cell in session.exec(select(MatrixCell)).all():
        for rid in [*(cell.evidence or []), *(cell.demo_evidence or [])]:
            if rid in ids:
                cited.setdefault(rid, cell.id)
    if cited and not force:
        rid, cell_id = next(iter(cited.items()))
        raise ConfigError(
            f"run {rid} is evidence of matrix cell {cell_id}",
            remedy="keep it, or pass --force (the cell then cites a run that is gone)",
        )
    if not force:
        for base in current_baselines(session):
            held = [rid for rid in base.runs if rid in ids]
            if held:
                raise ConfigError(
                    f"run {held[0]} is in baseline {base.name} ({base.pipeline} on {base.device})",
                    remedy="set the baseline on other runs first, or pass --force (it then names a run that is gone)",
                )
    out = []
    for run in runs:
        n_req = session.exec(
            select(func.count()).select_from(RunRequest).where(RunRequest.run_id == run.id)
        ).one()
        n_smp = session.exec(
            select(func.count()).select_from(RunSample).where(RunSample.run_id == run.id)
        ).one()
        out.append(
            {
                "id": run.id,
                "state": run.state,
                "kind": run.kind,
                "requests": int(n_req),
                "samples": int(n_smp),
            }
        )
    dep_ids = [d.id for d in deps]
    if dep_ids:
        session.execute(delete(DeploymentProcess).where(col(DeploymentProcess.deployment_id).in_(dep_ids)))
        session.execute(delete(Reservation).where(col(Reservation.deployment_id).in_(dep_ids)))
        # the admission history stays (its deployment link goes, as the schema's SET NULL says)
        session.execute(
            update(DeployAttempt)
            .where(col(DeployAttempt.deployment_id).in_(dep_ids))
            .values(deployment_id=None)
        )
        session.execute(delete(Deployment).where(col(Deployment.id).in_(dep_ids)))
    for table in (RunSample, RunRequest, RunSummary, TelemetrySample, RunLog):
        session.execute(delete(table).where(col(table.run_id).in_(ids)))
    session.execute(delete(Run).where(col(Run.id).in_(ids)))
    session.flush()
    return out
