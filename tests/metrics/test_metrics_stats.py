"""p50/p95 by nearest rank on known lists, always with the count; empty is null, not zero."""

from __future__ import annotations

import pytest

from edgelab.metrics.stats import nearest_rank, summarize


def test_nearest_rank_known_lists():
    # n = 5: p50 rank ceil(2.5) = 3, p95 rank ceil(4.75) = 5
    assert summarize([50, 15, 40, 20, 35]) == {
        "count": 5,
        "min": 15,
        "p50": 35,
        "p95": 50,
        "max": 50,
        "mean": 32,
    }
    # n = 20 (1..20): p50 rank 10, p95 rank 19
    s = summarize(range(1, 21))
    assert (s["count"], s["p50"], s["p95"]) == (20, 10, 19)
    # n = 100: p95 rank 95; n = 1: everything is the one value
    assert nearest_rank(list(range(1, 101)), 95) == 95
    assert summarize([7])["p50"] == summarize([7])["p95"] == 7
    # p100 is the max, p1 of 10 values the min (rank ceil(0.1) = 1)
    assert nearest_rank(list(range(10)), 100) == 9 and nearest_rank(list(range(10)), 1) == 0


def test_unknown_values_are_skipped_and_empty_is_null():
    assert summarize([None, 3, None, 1])["count"] == 2
    assert summarize([]) == {"count": 0, "min": None, "p50": None, "p95": None, "max": None, "mean": None}
    with pytest.raises(ValueError):
        nearest_rank([1.0], 0)
