"""VLA action and text metrics against hand-computed cases."""

from __future__ import annotations

import pytest

from edgelab.metrics.action import ActionSample, action_metrics, judge
from edgelab.metrics.text import text_metrics


def test_action_chunks_against_a_100_ms_control_period():
    period = 0.1  # 10 Hz
    a = ActionSample(t=0.065, obs_t=0.0, infer_start=0.010, infer_end=0.060, horizon=50)  # lat 50, age 65
    b = ActionSample(t=1.150, obs_t=1.0, infer_start=1.010, infer_end=1.140, horizon=50)  # lat 130, age 150
    c = ActionSample(t=2.450, obs_t=2.0, infer_start=2.000, infer_end=2.440, horizon=4)  # lat 440, age 450
    va, vb, vc = (judge(s, period) for s in (a, b, c))
    assert (va.latency_ms, va.age_ms, va.miss, va.stale) == (
        pytest.approx(50),
        pytest.approx(65),
        False,
        None,
    )
    # b: age 150 > 100 -> miss; stale, floor(150/100) = 1 step in the past, 49 left -> time-aligned
    assert (vb.miss, vb.stale, vb.skip_steps) == (True, "aligned", 1)
    # c: age 450 -> 4 steps past of a 4-step horizon -> nothing left: dropped
    assert (vc.miss, vc.stale, vc.skip_steps) == (True, "dropped", 4)
    m = action_metrics([a, b, c], period)
    assert m["deadline_misses"] == 2 and m["stale_aligned"] == 1 and m["stale_dropped"] == 1
    # latencies 50, 130, 440: p50 rank ceil(1.5) = 2 -> 130, p95 rank 3 -> 440
    assert m["latency_ms"]["count"] == 3
    assert m["latency_ms"]["p50"] == pytest.approx(130) and m["latency_ms"]["p95"] == pytest.approx(440)
    assert m["age_ms"]["p50"] == pytest.approx(150)


def test_action_without_observation_time_has_unknown_age_and_staleness():
    m = action_metrics([ActionSample(t=1.0, infer_start=0.8, infer_end=0.95)], 0.1)
    assert m["age_ms"]["count"] == 0 and m["age_ms"]["p50"] is None
    assert m["stale_aligned"] is None and m["stale_dropped"] is None  # unknown, not zero
    assert m["deadline_misses"] == 1  # judged on latency (150 ms > 100 ms) when age is unknown


def test_text_ttft_itl_tokens_per_s():
    # sent at 10.0; tokens at 10.20, 10.25, 10.30, 10.40 -> TTFT 200 ms, gaps 50, 50, 100
    m = text_metrics([(10.2, 1), (10.25, 1), (10.30, 1), (10.40, 1)], submitted=10.0)
    assert m["tokens"] == 4 and m["ttft_ms"] == pytest.approx(200)
    assert m["itl_ms"]["p50"] == pytest.approx(50) and m["itl_ms"]["p95"] == pytest.approx(100)
    assert m["decode_tok_s"] == pytest.approx(3 / 0.2)  # 3 tokens after the first over 200 ms
    assert text_metrics([], 0.0)["ttft_ms"] is None
