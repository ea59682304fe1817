"""Run the reference VLA in a fixed-rate control loop, one action-chunk event per inference.

The loop behaves like a robot controller: an observation is captured on each control tick,
inference runs, and the chunk is available when it ends. A tick that passes while inference
is still running is skipped (the next observation waits for the next tick), so an overrun
costs real control time, as it would on a robot.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from edgelab.metrics.events import (
    ActionChunk,
    RequestEnd,
    RequestStart,
    RunEnd,
    RunEndState,
    RunStart,
    StageTiming,
)
from edgelab.reference import PROVENANCE
from edgelab.reference.emit import Emitter
from edgelab.reference.vla import DIMS, FLOW_STEPS, HORIZON, ReferenceVLA, synthetic_observation


def run_vla(
    em: Emitter,
    *,
    control_hz: float = 10.0,
    steps: int = 50,
    slow_every: int = 0,
    slow_ms: float = 0.0,
    seed: int = 0,
    horizon: int = HORIZON,
    dims: int = DIMS,
    flow_steps: int = FLOW_STEPS,
    device: str | None = None,
    warmup: int = 0,
) -> int:
    """Run ``steps`` control ticks (the first ``warmup`` of them warm-up requests); returns the
    number of ticks skipped by overruns."""
    period = 1.0 / control_hz
    policy = ReferenceVLA(
        seed, horizon=horizon, dims=dims, steps=flow_steps, slow_every=slow_every, slow_ms=slow_ms
    )
    rng = np.random.default_rng(seed)
    em.emit(
        RunStart(
            t=time.time(),
            pipeline="internvla-a1",
            device=device,
            runtime=PROVENANCE["runtime"],
            meta={
                **PROVENANCE,
                "control_hz": control_hz,
                "control_period_s": period,
                "horizon": horizon,
                "dims": dims,
                "flow_steps": flow_steps,
                "slow_every": slow_every,
                "slow_ms": slow_ms,
                "seed": seed,
            },
        )
    )
    return episode(em, policy.infer, period_s=period, steps=steps, rng=rng, warmup=warmup)


def episode(
    em: Emitter,
    infer: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    period_s: float,
    steps: int,
    rng: np.random.Generator,
    warmup: int = 0,
) -> int:
    """One episode of synthetic observations at the control rate (each inference a request, the
    first ``warmup`` in phase warmup), then the run's end."""
    skipped = control_loop(
        em,
        infer,
        period_s=period_s,
        steps=steps,
        request=f"{em.run or 'run'}-tick",
        observe=lambda: synthetic_observation(rng),
        warmup=warmup,
    )
    em.emit(RunEnd(t=time.time(), state=RunEndState.FINISHED))
    return skipped


def control_loop(
    em: Emitter,
    infer: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    period_s: float,
    steps: int,
    request: str,
    observe: Callable[[], dict[str, Any]],
    warmup: int = 0,
) -> int:
    """Tick every ``period_s``: observe, infer, emit the chunk; returns the ticks skipped by overruns.

    Each inference is one request (``REQUEST-N``, from its observation to its chunk), the first
    ``warmup`` of them in phase warmup, so a run counts every chunk it announced. ``infer`` may be
    a local policy or a remote endpoint's client: the timings are taken around the call, so for a
    remote policy they include the network round trip, as the robot sees it.
    """
    wall0, mono0 = time.time(), time.monotonic()

    def wall(m: float) -> float:
        return wall0 + (m - mono0)

    skipped = 0
    tick = 0
    for k in range(steps):
        t_tick = mono0 + tick * period_s
        now = time.monotonic()
        if t_tick > now:
            time.sleep(t_tick - now)
        obs_m = time.monotonic()
        rq = f"{request}-{k + 1}"
        phase = "warmup" if k < warmup else "measured"
        em.emit(RequestStart(t=wall(obs_m), request=rq, phase=phase, input="synthetic observation"))
        obs = observe()
        start_m = time.monotonic()
        try:
            out = infer(obs)
        except Exception as err:  # the request fails with its reason; the caller decides about the run
            em.emit(RequestEnd(t=time.time(), request=rq, ok=False, error=str(err)[:300]))
            raise
        end_m = time.monotonic()
        actions = np.asarray(out["actions"])
        em.emit(StageTiming(t=wall(end_m), request=rq, stage="infer", start=wall(start_m), end=wall(end_m)))
        em.emit(
            ActionChunk(
                t=wall(end_m),
                request=rq,
                idx=k,
                obs_t=wall(obs_m),
                infer_start=wall(start_m),
                infer_end=wall(end_m),
                horizon=int(actions.shape[0]),
                dims=int(actions.shape[1]) if actions.ndim > 1 else 1,
            )
        )
        em.emit(RequestEnd(t=wall(end_m), request=rq, ok=True))
        # next tick: the first one still ahead of us; ticks passed during inference are skipped
        nxt = tick + 1
        while mono0 + nxt * period_s < time.monotonic():
            nxt += 1
        skipped += nxt - tick - 1
        tick = nxt
    return skipped
