"""The run a deploy or a bench is about to start, recorded once: its provenance and its row.

Deploy and bench record a planned run the same way (the provenance from the plan as bound, then
the run with its owner columns), so both stored runs answer "what ran, from what" alike; this is
the one place that assembles it.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from edgelab.deploy import owner
from edgelab.metrics.provenance import run_provenance
from edgelab.store.runs import create_run


def record_run(
    s: Session,
    planned: Any,  # an edgelab.deploy.planning.Planned
    *,
    run_id: str,
    kind: str,
    source: str,
    device: str,
    virtual: bool,
    command: str,
    plan: dict[str, Any],
    meta: dict[str, Any],
    play: dict[str, Any] | None = None,
    meta_from_provenance: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Create run ``run_id`` (``kind`` deploy or bench) with the provenance of ``planned``; returns it.

    ``plan`` is the plan as stored (``ExecutionPlan.to_dict()``, serialised once by the caller);
    ``meta_from_provenance`` names provenance fields the run's meta repeats (bench: weights, threads).
    """
    p = planned.plan
    prov = run_provenance(
        s,
        source=source,
        device=device,
        virtual=virtual,
        runtime=p.runtime,
        strategy=p.strategy,
        profile=planned.profile.device_class,
        plan=plan,
        command=command,
        facts_hash=planned.facts_hash,
        run_id=run_id,
        play=play,
        probe=planned.probe,
    )  # cache observed, power, the build and models as bound; unknown said
    for key in meta_from_provenance:
        meta[key] = prov[key]
    create_run(
        s,
        id=run_id,
        pipeline=p.pipeline,
        device_name=device,
        runtime=p.runtime,
        strategy=p.strategy,
        kind=kind,
        virtual=virtual,
        command=prov["command"],  # as the provenance keeps it: an endpoint's password masked
        provenance=prov,
        meta=meta,
        **owner.me(),
    )
    return prov
