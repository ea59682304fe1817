"""The S3 VLA controller: a fixed-rate control loop fed by an inference thread running the action head.

Control and inference are separate threads, as on a robot: the control thread ticks every
period, captures an observation (stamped), hands it to inference (latest wins: an observation
not yet picked up is replaced by a newer one) and executes the action for *now* from the chunk
buffer (time-aligned to the chunk's observation). The inference thread encodes the newest
observation, integrates the flow head from seeded noise with K Euler steps on the runtime
(``x += v(x, k/K, cond) / K``), and publishes the chunk. Deadline accounting: a chunk older than
one period on arrival is a miss; a tick with no action left to execute is a hold.

The observation encoder (vision + backbone) is edgelab's numpy reference on the host CPU; only
the action head runs on the device runtime, and the events say so.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgelab.artifacts.hashing import sha256_path
from edgelab.controller.chunks import Chunk, ChunkBuffer
from edgelab.controller.engine import Engine
from edgelab.metrics.events import (
    ActionChunk,
    LogLine,
    RequestEnd,
    RequestStart,
    RunEnd,
    RunEndState,
    RunStart,
    StageTiming,
)
from edgelab.metrics.stats import summarize
from edgelab.reference.emit import Emitter
from edgelab.reference.vla import DIMS as ACTION_DIMS
from edgelab.reference.vla import FLOW_STEPS, HORIZON, ObservationEncoder, synthetic_observation


class FlowSampler:
    """K Euler steps of the exported velocity graph on one runtime; step times kept."""

    def __init__(
        self, engine: Engine, *, steps: int = FLOW_STEPS, horizon: int = HORIZON, dims: int = ACTION_DIMS
    ):
        self.engine, self.steps, self.horizon, self.dims = engine, steps, horizon, dims
        self.step_ms: list[float] = []

    def sample(self, cond: np.ndarray, noise: np.ndarray) -> np.ndarray:
        x = noise.astype(np.float32, copy=True)
        cond = np.ascontiguousarray(cond, dtype=np.float32).reshape(1, -1)
        dt = 1.0 / self.steps
        for k in range(self.steps):
            t0 = time.perf_counter()
            v = self.engine.run({"cond": cond, "x": x, "tau": np.array([k * dt], np.float32)})
            self.step_ms.append((time.perf_counter() - t0) * 1000.0)
            x = x + dt * v
        return x


def noise_for(seed: int, idx: int, horizon: int = HORIZON, dims: int = ACTION_DIMS) -> np.ndarray:
    """The flow's starting noise for chunk ``idx``: fixed by (seed, idx), so runtimes can be compared."""
    return np.random.default_rng([seed, idx]).standard_normal((horizon, dims)).astype(np.float32)


@dataclass
class ControllerStats:
    ticks: int = 0
    held: int = 0  # ticks with no action left to execute
    superseded: int = 0  # observations replaced before inference picked them up
    tick_late_ms: list[float] = field(default_factory=list)
    executed: list[tuple[int, int]] = field(default_factory=list)  # (chunk idx, step) per executed tick

    def as_dict(self, buffer: ChunkBuffer, sampler: FlowSampler, infer_ms: list[float]) -> dict[str, Any]:
        return {
            "ticks": self.ticks,
            "held_ticks": self.held,
            "superseded_observations": self.superseded,
            "chunks_published": buffer.published,
            "chunks_aligned": buffer.aligned,
            "chunks_dropped": buffer.dropped,
            "tick_late_ms": summarize(self.tick_late_ms),
            "step_ms": summarize(sampler.step_ms),
            "chunk_infer_ms": summarize(infer_ms),
        }


class CpuHog:
    """Fault injection: ``n`` busy-looping child processes for the length of the run (stopped by PID)."""

    def __init__(self, n: int):
        self.n = n
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> CpuHog:
        for _ in range(self.n):
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", "while True: pass"],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                )
            )
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait(timeout=10)


class VlaController:
    """One episode: ``ticks`` control ticks at ``control_hz`` over the action head on ``engine``."""

    def __init__(
        self,
        em: Emitter,
        engine: Engine,
        *,
        control_hz: float = 10.0,
        seed: int = 0,
        staleness_s: float | None = None,
        flow_steps: int = FLOW_STEPS,
        observe: Callable[[], dict[str, Any]] | None = None,
    ):
        self.em, self.engine = em, engine
        self.period = 1.0 / control_hz
        self.seed = seed
        self.encoder = ObservationEncoder(seed)
        self.sampler = FlowSampler(engine, steps=flow_steps)
        self.buffer = ChunkBuffer(self.period, staleness_s)
        rng = np.random.default_rng(seed)
        self.observe = observe or (lambda: synthetic_observation(rng))
        self.stats = ControllerStats()
        self.infer_ms: list[float] = []
        self.cycle_ms: list[float] = []
        self._slot: tuple[dict[str, Any], float] | None = None
        self._cv = threading.Condition()
        self._stop = False
        self._error: BaseException | None = None
        self.warmup_chunks = 0  # the first chunks of the episode are warm-up requests
        self.wall0, self.mono0 = time.time(), time.monotonic()

    def wall(self, m: float) -> float:
        return self.wall0 + (m - self.mono0)

    def warmup(self, n: int) -> None:
        """The first ``n`` chunks of the episode are warm-up requests: timed and recorded (phase
        warmup), apart from the measured ones."""
        self.warmup_chunks = max(0, int(n))

    # --- inference thread -------------------------------------------------------------------
    def _infer_loop(self, request: str) -> None:
        idx = 0
        rq: str | None = None  # the request in flight (ended as failed if its inference raises)
        try:
            while True:
                with self._cv:
                    while self._slot is None and not self._stop:
                        self._cv.wait()
                    if self._slot is None:
                        return
                    obs, obs_m = self._slot
                    self._slot = None
                rq = f"{request}-{idx + 1}"  # each inferred observation is one request
                phase = "warmup" if idx < self.warmup_chunks else "measured"
                self.em.emit(RequestStart(t=self.wall(obs_m), request=rq, phase=phase, input="observation"))
                enc0 = time.monotonic()
                cond = self.encoder.encode(obs)
                start = time.monotonic()
                actions = self.sampler.sample(cond, noise_for(self.seed, idx))
                end = time.monotonic()
                self.infer_ms.append((end - start) * 1000.0)
                self.buffer.publish(Chunk(idx, obs_m, end, actions))
                self.em.emit(
                    StageTiming(
                        t=self.wall(start),
                        request=rq,
                        stage="encoder",
                        start=self.wall(enc0),
                        end=self.wall(start),
                    )
                )
                self.em.emit(
                    ActionChunk(
                        t=self.wall(end),
                        request=rq,
                        idx=idx,
                        obs_t=self.wall(obs_m),
                        infer_start=self.wall(start),
                        infer_end=self.wall(end),
                        horizon=int(actions.shape[0]),
                        dims=int(actions.shape[1]),
                    )
                )
                self.em.emit(RequestEnd(t=self.wall(end), request=rq, ok=True))
                rq = None
                self.cycle_ms.append((time.monotonic() - start) * 1000.0)  # head + buffer + event path
                idx += 1
        except BaseException as e:  # surfaced by run(); the control loop stops at its next tick
            if rq is not None:
                self.em.emit(
                    RequestEnd(t=time.time(), request=rq, ok=False, error=f"{type(e).__name__}: {e}"[:300])
                )
            self._error = e

    # --- control thread ---------------------------------------------------------------------
    def run(self, ticks: int, request: str) -> ControllerStats:
        worker = threading.Thread(target=self._infer_loop, args=(request,), name="vla-infer", daemon=True)
        worker.start()
        t0 = time.monotonic()
        try:
            for k in range(ticks):
                due = t0 + k * self.period
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                now = time.monotonic()
                self.stats.tick_late_ms.append(max(0.0, (now - due) * 1000.0))
                self.stats.ticks += 1
                if self._error is not None:
                    break
                obs = self.observe()
                with self._cv:
                    if self._slot is not None:
                        self.stats.superseded += 1
                    self._slot = (obs, now)
                    self._cv.notify()
                action, cidx, step = self.buffer.action_at(now)
                if action is None:
                    self.stats.held += 1
                else:
                    self.stats.executed.append((cidx, step))
        finally:
            with self._cv:  # the last observation is still inferred (drain), unless inference failed
                self._stop = True
                if self._error is not None:
                    self._slot = None
                self._cv.notify()
            worker.join(timeout=30)
        if self._error is not None:
            raise self._error
        return self.stats

    def summary(self) -> dict[str, Any]:
        return self.stats.as_dict(self.buffer, self.sampler, self.infer_ms) | {
            "chunk_cycle_ms": summarize(self.cycle_ms)
        }


def run_episode(
    em: Emitter,
    engine: Engine,
    *,
    model: Path,
    control_hz: float,
    ticks: int,
    warmup: int,
    seed: int,
    device: str | None,
    hog: int = 0,
    staleness_s: float | None = None,
    extra_meta: dict[str, Any] | None = None,
) -> tuple[bool, dict[str, Any]]:
    """run.start (with model SHA-256 and observed placement), one measured episode, a summary, run.end."""
    ctl = VlaController(em, engine, control_hz=control_hz, seed=seed, staleness_s=staleness_s)
    ctl.warmup(warmup)
    meta = {
        "control_hz": control_hz,
        "control_period_s": ctl.period,
        "horizon": HORIZON,
        "dims": ACTION_DIMS,
        "flow_steps": ctl.sampler.steps,
        "seed": seed,
        "warmup_chunks": warmup,
        "cpu_hog": hog,
        "staleness_s": ctl.buffer.staleness_s,
        "weights": "random",
        "model": {"path": str(model), "sha256": sha256_path(model), "stage": "action_head"},
        "runtime_library": engine.library,
        "placement": {
            "action_head": engine.placement.as_dict(),
            "encoder": {
                "runtime": "reference",
                "observed": "cpu",
                "fallback": False,
                "detail": "edgelab numpy reference encoder on the host CPU",
            },
        },
        **(extra_meta or {}),
    }
    em.emit(
        RunStart(
            t=time.time(),
            pipeline="internvla-a1",
            device=device,
            runtime=engine.runtime,
            strategy="S3",
            meta=meta,
        )
    )
    rid = f"{em.run or 'run'}-chunk"
    ok, err = True, None
    with CpuHog(hog):
        try:
            ctl.run(ticks, rid)
        except Exception as e:  # noqa: BLE001 - reported as the run's failure, then re-raised
            ok, err = False, f"{type(e).__name__}: {e}"
    summary = ctl.summary()
    em.emit(
        LogLine(
            t=time.time(),
            stream="controller",
            level="summary",
            line=json.dumps(summary, separators=(",", ":")),
        )
    )
    em.emit(RunEnd(t=time.time(), state=RunEndState.FINISHED if ok else RunEndState.FAILED, error=err))
    return ok, summary
