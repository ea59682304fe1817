"""Action-chunk (VLA) metrics: inference latency, observation-to-action age, deadline misses, staleness.

A controller ticks every ``period_s``. An observation captured at ``obs_t`` yields a chunk
available at ``t``; its age is ``t - obs_t``. The chunk misses its deadline when the age
exceeds one control period (the action was not there by the next tick). A chunk older than
the staleness bound (default one period) is stale: its first floor(age / period) actions are
already in the past, so it is time-aligned (those steps skipped) while some remain, and
dropped when none of its ``horizon`` steps is still ahead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from edgelab.metrics.stats import summarize


@dataclass(frozen=True, slots=True)
class ActionSample:
    t: float  # chunk available (lab clock, s)
    obs_t: float | None = None
    infer_start: float | None = None
    infer_end: float | None = None
    horizon: int | None = None


@dataclass(frozen=True, slots=True)
class ActionVerdict:
    latency_ms: float | None
    age_ms: float | None
    miss: bool | None
    stale: str | None  # None (fresh), "aligned", "dropped"; None also when age unknown
    skip_steps: int | None


def judge(s: ActionSample, period_s: float, staleness_s: float | None = None) -> ActionVerdict:
    """The figures of one chunk against a control period."""
    latency = None if s.infer_start is None or s.infer_end is None else (s.infer_end - s.infer_start) * 1000.0
    age = None if s.obs_t is None else (s.t - s.obs_t) * 1000.0
    basis = age if age is not None else latency
    miss = None if basis is None else basis > period_s * 1000.0 + 1e-9
    bound = period_s if staleness_s is None else staleness_s
    stale, skip = None, None
    if age is not None:
        skip = 0
        if age > bound * 1000.0 + 1e-9:
            skip = math.floor(age / (period_s * 1000.0) + 1e-9)
            stale = "dropped" if s.horizon is not None and skip >= s.horizon else "aligned"
    return ActionVerdict(latency, age, miss, stale, skip)


def action_metrics(
    samples: Iterable[ActionSample], period_s: float, staleness_s: float | None = None
) -> dict[str, Any]:
    """Batch recompute over a run's (or request's) chunks."""
    verdicts = [judge(s, period_s, staleness_s) for s in samples]
    return verdicts_summary(verdicts, period_s)


def verdicts_summary(verdicts: list[ActionVerdict], period_s: float) -> dict[str, Any]:
    known_miss = [v.miss for v in verdicts if v.miss is not None]
    known_age = [v for v in verdicts if v.age_ms is not None]
    return {
        "chunks": len(verdicts),
        "control_period_ms": period_s * 1000.0,
        "latency_ms": summarize(v.latency_ms for v in verdicts),
        "age_ms": summarize(v.age_ms for v in verdicts),
        "deadline_misses": sum(known_miss) if known_miss else None,
        "stale_aligned": sum(v.stale == "aligned" for v in known_age) if known_age else None,
        "stale_dropped": sum(v.stale == "dropped" for v in known_age) if known_age else None,
    }
