"""The action-chunk buffer between inference and the control loop: timestamps, staleness, alignment.

A chunk's action k belongs to time ``obs_t + k * period`` (the policy saw the world at
``obs_t``). On arrival a chunk is judged by the same rule as edgelab's action metrics
(:func:`edgelab.metrics.action.judge`): older than the staleness bound, its past steps are
skipped (time-aligned), or the whole chunk is dropped when none is left. At each control tick
the controller takes the newest chunk's action for *now*; when the newest chunk is used up the
tick holds (no fresh action), which is what a deadline miss costs a robot.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from edgelab.metrics.action import ActionSample, judge


@dataclass
class Chunk:
    idx: int
    obs_t: float  # monotonic seconds: observation capture
    ready_t: float  # monotonic seconds: chunk available
    actions: np.ndarray  # [horizon, dims]
    stale: str | None = None  # None, "aligned", "dropped"
    skip: int = 0


class ChunkBuffer:
    """Thread-safe: the inference thread publishes, the control thread reads."""

    def __init__(self, period_s: float, staleness_s: float | None = None):
        self.period_s = period_s
        self.staleness_s = period_s if staleness_s is None else staleness_s
        self._lock = threading.Lock()
        self._current: Chunk | None = None
        self.published = self.aligned = self.dropped = 0

    def publish(self, chunk: Chunk) -> Chunk:
        """Judge the chunk on arrival; a dropped chunk never replaces the current one."""
        v = judge(
            ActionSample(t=chunk.ready_t, obs_t=chunk.obs_t, horizon=int(chunk.actions.shape[0])),
            self.period_s,
            self.staleness_s,
        )
        chunk.stale, chunk.skip = v.stale, v.skip_steps or 0
        with self._lock:
            self.published += 1
            if chunk.stale == "dropped":
                self.dropped += 1
                return chunk
            if chunk.stale == "aligned":
                self.aligned += 1
            if self._current is None or chunk.obs_t >= self._current.obs_t:
                self._current = chunk
        return chunk

    def action_at(self, now: float) -> tuple[np.ndarray | None, int | None, int | None]:
        """The action for time ``now``: (action, chunk idx, step in chunk); None when none is left."""
        with self._lock:
            c = self._current
        if c is None:
            return None, None, None
        step = max(math.floor((now - c.obs_t) / self.period_s + 1e-9), c.skip)
        if step >= c.actions.shape[0]:
            return None, c.idx, step
        return c.actions[step], c.idx, step
