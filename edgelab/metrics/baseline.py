"""Setting and reading named baselines over stored runs (the table is edgelab.store.baselines).

A baseline's runs must be finished and of one device, pipeline, strategy and runtime: that key is
what later runs find it by, so a set that mixed two would compare nothing with anything.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from edgelab.errors import ConfigError
from edgelab.metrics import compare as cmp
from edgelab.metrics.runsets import run_values
from edgelab.states import RunState
from edgelab.store.baselines import Baseline, add_baseline, find_baseline, history
from edgelab.store.runs import get_run


def set_baseline(
    session: Session, name: str, refs: list[str], *, set_by: str, note: str | None = None
) -> Baseline:
    """Record the runs named by ``refs`` as baseline ``name`` of their common key."""
    runs = []
    for ref in refs:
        run = get_run(session, ref)
        if run.id not in [r.id for r in runs]:
            runs.append(run)
    for run in runs:
        if run.state != RunState.FINISHED:
            raise ConfigError(
                f"run {run.id} is {run.state}: a baseline holds finished runs only",
                remedy="pick finished runs (edgelab runs ls --state finished)",
            )
        if not run.device_name or not run.pipeline:
            raise ConfigError(f"run {run.id} names no device or pipeline", remedy="pick runs of a device")
    for attr in ("device_name", "pipeline", "strategy", "runtime"):
        seen = sorted({str(getattr(r, attr)) for r in runs})
        if len(seen) > 1:
            raise ConfigError(
                f"the runs are of different {attr.replace('_name', '')}s ({', '.join(seen)})",
                remedy="a baseline is one device, pipeline, strategy and runtime: set one per key",
            )
    first = runs[0]
    return add_baseline(
        session,
        name,
        device=str(first.device_name),
        pipeline=str(first.pipeline),
        strategy=first.strategy,
        runtime=first.runtime,
        runs=[r.id for r in runs],
        set_by=set_by,
        note=note,
    )


def describe(
    session: Session, name: str, *, device: str | None = None, pipeline: str | None = None
) -> dict[str, Any]:
    """The current baseline with each run's medians, and its history under that key."""
    base = find_baseline(session, name, device=device, pipeline=pipeline)
    runs = []
    for rid in base.runs:
        run = get_run(session, rid)
        vals = run_values(session, run)
        runs.append(
            {
                "id": run.id,
                "created_at": run.created_at.isoformat(),
                "medians": {k: cmp.side(v).median for k, v in vals.items()},
            }
        )
    past = [h.to_dict() for h in history(session, name) if h.key() == base.key()]
    return {"baseline": base.to_dict(), "runs": runs, "history": past}
