"""Reference internvla-a1: flow-matching head shapes, and deadline misses from an injected slow step."""

from __future__ import annotations

import sys

import numpy as np

from edgelab.metrics.action import ActionSample, action_metrics
from edgelab.metrics.events import ActionChunk, RunStart, decode_lines
from edgelab.reference.vla import FlowActionHead, ObservationEncoder, ReferenceVLA, synthetic_observation


def test_flow_head_gives_a_50x32_chunk_from_10_euler_steps():
    head = FlowActionHead(seed=0)
    emb = ObservationEncoder(seed=0).encode(synthetic_observation(np.random.default_rng(0)))
    a = head.sample(emb, np.random.default_rng(1))
    assert a.shape == (50, 32) and np.isfinite(a).all()
    noise = np.random.default_rng(1).standard_normal((50, 32)).astype(np.float32)
    assert not np.allclose(a, noise)  # the flow moved the noise
    # one observation conditions the result: another observation, same noise, other actions
    emb2 = ObservationEncoder(seed=0).encode(synthetic_observation(np.random.default_rng(9)))
    assert not np.allclose(a, head.sample(emb2, np.random.default_rng(1)))


def test_policy_shape_follows_configuration():
    pol = ReferenceVLA(seed=0, horizon=10, dims=8, steps=4)
    out = pol.infer(synthetic_observation(np.random.default_rng(0)))
    assert out["actions"].shape == (10, 8)
    assert pol.metadata["action_space"] == {"horizon": 10, "dims": 8}
    assert pol.metadata["weights"] == "random"


def test_10hz_run_with_injected_slow_step_shows_deadline_misses(local_transport):
    argv = [
        sys.executable,
        "-m",
        "edgelab.reference",
        "vla",
        "--control-hz",
        "10",
        "--steps",
        "12",
        "--slow-every",
        "4",
        "--slow-ms",
        "250",
        "--run",
        "v1",
    ]
    proc = local_transport.stream(argv)
    try:
        lines = list(proc.lines())
        assert proc.wait(60) == 0, proc.stderr
    finally:
        proc.cancel()
    assert all('"weights":"random"' in line for line in lines)
    events = list(decode_lines(lines, skip_other=False))
    start = events[0]
    assert isinstance(start, RunStart) and start.meta["control_period_s"] == 0.1
    chunks = [ev for ev in events if isinstance(ev, ActionChunk)]
    assert [c.idx for c in chunks] == list(range(12))
    assert all((c.horizon, c.dims) == (50, 32) for c in chunks)
    for c in chunks:
        assert c.obs_t <= c.infer_start <= c.infer_end == c.t
    samples = [
        ActionSample(
            t=c.t, obs_t=c.obs_t, infer_start=c.infer_start, infer_end=c.infer_end, horizon=c.horizon
        )
        for c in chunks
    ]
    m = action_metrics(samples, period_s=0.1)
    assert m["latency_ms"]["count"] == 12 and m["latency_ms"]["p95"] >= 250
    assert m["age_ms"]["count"] == 12
    assert m["deadline_misses"] >= 3
    slow = [c for c in chunks if (c.idx + 1) % 4 == 0]  # inferences 4, 8, 12
    assert all((c.t - c.obs_t) > 0.1 for c in slow)
    # an overrun skips the ticks it covered: the next observation is on a later tick
    after = {c.idx: c for c in chunks}
    for c in slow[:-1]:
        assert after[c.idx + 1].obs_t - c.obs_t >= 0.25
