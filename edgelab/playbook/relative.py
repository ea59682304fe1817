"""The baseline a playbook's relative gates judge a run against, and moving it on success.

The baseline is found by name for the run's own device, pipeline, strategy and runtime. Its
figures are each metric's distribution over the baseline runs' pooled raw values (the same
statistic the gate names, nearest rank like every summary); counts without raw values (underruns,
failed requests) are the newest baseline run's. The comparison (A = baseline, B = the run) gives
the ratio of medians with its interval that verdict gates read and every failure message quotes.
"""

from __future__ import annotations

import copy
from typing import Any

from sqlmodel import Session

from edgelab.metrics.runsets import RunSet, compare_sets, pooled_values, resolve
from edgelab.metrics.stats import summarize
from edgelab.playbook.gates import COMPARE_NAME, METRICS, BaselineFigures
from edgelab.store.baselines import find_baseline
from edgelab.store.runs import get_run, get_summary


def baseline_for(session: Session, name: str, run_id: str, *, confidence: float = 0.99) -> BaselineFigures:
    """Baseline ``name`` of the run's key, its pooled figures and the run compared with it.
    NotFound when no such baseline is set; ConfigError when the two are not comparable."""
    run = get_run(session, run_id)
    base = find_baseline(
        session,
        name,
        device=run.device_name,
        pipeline=run.pipeline,
        strategy=run.strategy,
        runtime=run.runtime,
    )
    b = resolve(session, run.id)
    a = resolve(session, f"baseline:{name}", like=b)
    comp = compare_sets(session, a, b, confidence=confidence)
    return BaselineFigures(name, list(base.runs), figures(session, a), comp, confidence)


def figures(session: Session, side: RunSet) -> dict[str, Any]:
    """A summary-shaped dict of the set: pooled distributions where raw values exist."""
    newest = side.runs[0]
    summ = get_summary(session, newest.id, "final")
    out: dict[str, Any] = copy.deepcopy(summ.metrics) if summ else {}
    pooled = side.values or pooled_values(session, side.runs)
    for gate_name, compare_name in COMPARE_NAME.items():
        if compare_name in pooled:
            path = METRICS[gate_name][0]
            cur = out
            for key in path[:-1]:
                if not isinstance(cur.get(key), dict):
                    cur[key] = {}
                cur = cur[key]
            cur[path[-1]] = summarize(pooled[compare_name])
    return out
