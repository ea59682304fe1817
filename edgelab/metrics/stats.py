"""Distribution summaries the lab reports: p50/p95 by nearest rank, always with count, min and max.

Nearest rank (no interpolation) so every reported percentile is a value that was measured.
An empty sample gives count 0 and null figures, never zeros.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def nearest_rank(sorted_values: list[float], p: float) -> float | None:
    """The value at rank ceil(p/100 * n) (1-based) of an ascending list; None when empty."""
    if not sorted_values:
        return None
    if not 0 < p <= 100:
        raise ValueError(f"percentile {p} is outside (0, 100]")
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values) - 1e-9))
    return sorted_values[rank - 1]


def summarize(values: Iterable[float | None]) -> dict[str, Any]:
    """{count, min, p50, p95, max, mean} of the known values (None entries are unknown, skipped)."""
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return {"count": 0, "min": None, "p50": None, "p95": None, "max": None, "mean": None}
    return {
        "count": len(vals),
        "min": vals[0],
        "p50": nearest_rank(vals, 50),
        "p95": nearest_rank(vals, 95),
        "max": vals[-1],
        "mean": sum(vals) / len(vals),
    }
