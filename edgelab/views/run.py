"""The live view of one run, computed once for `edgelab watch` and the TUI's Run page.

A ``RunReader`` keeps the last sample and log ids it has read, so each poll reads only
what arrived since; whoever writes the run (``edgelab deploy`` in another process, an
ingest, an import) is seen through the database alone. Headline figures are the metrics
engineer's live/final summary, or their batch recompute from the stored rows when no
summary has been written yet: no view computes a metric its own way, except the series
drawn as sparklines (chunk or inter-token gaps, the playout buffer level with the
ring-buffer model of DESIGN §5, action latency, telemetry), which are computed here and
only here, so two views of the same run show the same figures.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from edgelab.labels import strategy_label
from edgelab.store.db import session_scope
from edgelab.units import clock

TAIL_LINES = 500
SERIES_POINTS = 120


@dataclass(frozen=True)
class Reading:
    """The newest telemetry sample of the run (or, when the run has none, of its device)."""

    temps_c: dict[str, float]
    power_w: dict[str, float]
    clocks_mhz: dict[str, float]
    mem_available_bytes: int | None
    source: str | None
    virtual: bool


@dataclass
class RunView:
    run: dict[str, Any]
    kind: str | None  # audio | action | text | None (nothing measured yet)
    summary: dict[str, Any] | None
    summary_source: str  # live | final | recomputed | none
    chunk_gaps_ms: list[float]  # audio chunk gaps, or a text run's inter-token gaps (see gap_kind)
    buffer_ms: list[float]  # playout buffer level after each chunk of the latest request
    deadline_misses_per_min: float | None
    period_ms: float | None
    telemetry: dict[str, list[float]]
    new_log_lines: list[str]
    latency_ms: list[float] = field(default_factory=list)  # action chunks' inference latency, recent
    polls: int = 0
    latest: Reading | None = None

    @property
    def gap_kind(self) -> str:
        """What ``chunk_gaps_ms`` measures: "chunk" (audio) or "inter-token" (a text run)."""
        return "inter-token" if self.kind == "text" else "chunk"

    @property
    def gap_label(self) -> str:
        """The gap series' name as every view captions it."""
        return "inter-token gaps" if self.kind == "text" else "chunk gap"

    @property
    def final(self) -> bool:
        from edgelab.store.runs import FINAL_STATES

        return self.run["state"] in FINAL_STATES


def expected_kind(pipeline: str | None) -> str | None:
    """What a run of ``pipeline`` measures (audio, action, text), from the catalog before its first
    sample: a text run is never shown audio's chunk gaps while it waits."""
    if not pipeline:
        return None
    from edgelab.catalog.pipelines import load_pipelines, pipeline_aliases

    try:
        specs = load_pipelines()
    except Exception:  # noqa: BLE001 - a broken catalog leaves the kind to the samples
        return None
    spec = specs.get(pipeline_aliases(specs).get(pipeline, pipeline))
    return spec.metrics[0] if spec and spec.metrics else None  # the pipeline's first figure kind


def buffer_levels(chunks: list[tuple[float, int, int]]) -> list[float]:
    """Audio buffered (ms) just after each chunk arrives, for a player started at TTFA.

    The ring-buffer model of DESIGN §5: chunk i is needed at S + C_i + stalls so far; a late
    chunk stalls playback (buffer empty, cursor shifted). ``chunks`` is (t_ms, samples, sr).
    """
    audio = sorted((c for c in chunks if c[1] > 0), key=lambda c: c[0])
    if not audio:
        return []
    start, shift, delivered, out = audio[0][0], 0.0, 0.0, []
    for t_ms, samples, sr in audio:
        needed = start + delivered + shift
        if t_ms > needed:
            shift += t_ms - needed
        delivered += samples * 1000.0 / sr
        played = max(0.0, min(delivered, t_ms - start - shift))
        out.append(round(delivered - played, 1))
    return out


@dataclass
class RunReader:
    """Reads one run incrementally. ``poll()`` may be called from several threads (the TUI's
    exclusive worker does not stop a thread already reading): one reads at a time, so no sample
    is folded twice."""

    engine: Engine
    run_id: str
    _sample_id: int = 0
    _log_id: int = 0
    _gaps: deque = field(default_factory=lambda: deque(maxlen=SERIES_POINTS))
    _last_audio: dict[str, tuple[float, int, int]] = field(default_factory=dict)  # request -> last chunk
    _chunks: dict[str, list[tuple[float, int, int]]] = field(default_factory=dict)
    _latest_request: str | None = None
    _actions: deque = field(default_factory=lambda: deque(maxlen=5000))  # (t, verdict miss)
    _latency: deque = field(default_factory=lambda: deque(maxlen=SERIES_POINTS))
    _kind: str | None = None
    _polls: int = 0
    _last_token: dict[str, float] = field(default_factory=dict)  # request -> last token's t_ms
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def poll(self) -> RunView:
        with self._lock:
            return self._poll()

    def _poll(self) -> RunView:
        from edgelab.metrics.live import recompute
        from edgelab.store.runs import (
            execution_of,
            get_run,
            get_summary,
            logs_of,
            requests_of,
            samples_of,
            telemetry_of,
        )

        with session_scope(self.engine, write=False) as s:
            run = get_run(s, self.run_id)
            self.run_id = run.id
            meta = dict(run.meta or {})
            period_s = meta.get("control_period_s")
            new = samples_of(s, run.id, after_id=self._sample_id)
            logs = logs_of(s, run.id, after_id=self._log_id)
            summary_row = get_summary(s, run.id, "final") or get_summary(s, run.id, "live")
            summary = dict(summary_row.metrics) if summary_row else None
            source = summary_row.kind if summary_row else "none"
            if summary is None and (new or self._sample_id):
                reqs = requests_of(s, run.id)
                if reqs:
                    summary = recompute(reqs, samples_of(s, run.id), float(period_s) if period_s else None)
                    source = "recomputed"
            tel = telemetry_of(s, run_id=run.id, limit=SERIES_POINTS)
            newest = tel[-1:] or (telemetry_of(s, device=run.device_name, limit=1) if run.device_name else [])
            run_d = {
                "id": run.id,
                "pipeline": run.pipeline,
                "device": run.device_name,
                "runtime": run.runtime,
                "strategy": run.strategy,
                "strategy_label": strategy_label(run.strategy, run.runtime),
                "state": run.state,
                "virtual": bool(run.virtual),
                "execution": execution_of(run),
                "kind": run.kind,
                "error": run.error,
                "started_at": run.started_at,
                "finished_at": run.finished_at,
                "heartbeat_at": run.heartbeat_at,
                "command": run.command,
            }
        self._take(new, float(period_s) if period_s else None)
        self._kind = self._kind or expected_kind(run_d["pipeline"])
        for row in logs:
            self._log_id = max(self._log_id, row.id)
        self._polls += 1
        return RunView(
            run=run_d,
            kind=self._kind,
            summary=summary,
            summary_source=source,
            chunk_gaps_ms=list(self._gaps),
            buffer_ms=buffer_levels(self._chunks.get(self._latest_request or "", [])),
            deadline_misses_per_min=self._misses_per_min(),
            period_ms=float(period_s) * 1000.0 if period_s else None,
            telemetry=_telemetry_series(tel),
            new_log_lines=[_log_line(r) for r in logs][-TAIL_LINES:],
            latency_ms=list(self._latency),
            polls=self._polls,
            latest=_reading(newest[-1]) if newest else None,
        )

    def _take(self, new: list[Any], period_s: float | None) -> None:
        """Fold newly stored samples into the series (gaps per request, buffer, action verdicts)."""
        from edgelab.metrics.action import ActionSample, judge

        for smp in new:
            self._sample_id = max(self._sample_id, smp.id)
            if smp.kind == "audio" and smp.t_ms is not None:
                self._kind = self._kind or "audio"
                req = smp.request or ""
                chunk = (float(smp.t_ms), int(smp.n or 0), int(smp.sample_rate or 24000))
                if chunk[1] > 0:
                    prev = self._last_audio.get(req)
                    if prev is not None:
                        self._gaps.append(round(chunk[0] - prev[0], 1))
                    self._last_audio[req] = chunk
                self._chunks.setdefault(req, []).append(chunk)
                self._latest_request = req
            elif smp.kind == "action":
                self._kind = self._kind or "action"
                miss = None
                if period_s:
                    miss = judge(
                        ActionSample(smp.t, smp.obs_t, smp.infer_start, smp.infer_end, smp.horizon), period_s
                    ).miss
                self._actions.append((smp.t, miss))
                if smp.infer_start is not None and smp.infer_end is not None:
                    self._latency.append(round((smp.infer_end - smp.infer_start) * 1000.0, 1))
            elif smp.kind == "text":
                self._kind = self._kind or "text"
                if smp.t_ms is not None:  # inter-token gaps, the text run's series
                    req = smp.request or ""
                    prev = self._last_token.get(req)
                    if prev is not None:
                        self._gaps.append(round(float(smp.t_ms) - prev, 1))
                    self._last_token[req] = float(smp.t_ms)

    def _misses_per_min(self) -> float | None:
        """Deadline misses over the last 60 s of action chunks (by their lab time); None if unknown."""
        known = [(t, m) for t, m in self._actions if m is not None]
        if not known:
            return None
        last = known[-1][0]
        window = [m for t, m in known if t >= last - 60.0]
        span = min(60.0, max(last - known[0][0], 1e-9))
        misses = sum(1 for m in window if m)
        return round(misses * 60.0 / span, 1) if span >= 1.0 else float(misses)


def run_view(engine: Engine, ref: str) -> RunView:
    """One run as it stands now (a fresh follower's first poll): what `watch --once` prints."""
    return RunReader(engine, ref).poll()


def _reading(row: Any) -> Reading:
    return Reading(
        temps_c=dict(row.temps_c or {}),
        power_w=dict(row.power_w or {}),
        clocks_mhz=dict(row.clocks_mhz or {}),
        mem_available_bytes=row.mem_available_bytes,
        source=row.source,
        virtual=bool(row.virtual),
    )


def _log_line(row: Any) -> str:
    """One stored event line as the log pane shows it: local time, what it is, its text.

    ``15:12:59.123 stderr  load_tensors: ...``; an error with its class; a stage with its span
    and request (``stage infer 12.3 ms  r1-tick-4``)."""
    at = clock(row.t)
    data = row.data or {}
    if row.kind == "stage":
        start, end = data.get("start"), data.get("end")
        span = f" {(end - start) * 1000.0:.1f} ms" if start is not None and end is not None else ""
        return f"{at} stage {row.message}{span}" + (f"  {row.request}" if row.request else "")
    if row.kind == "error":
        return f"{at} ERROR {row.level or ''} {row.message}".replace("  ", " ")
    stream = data.get("stream") or row.level or "log"
    return f"{at} {stream:<6} {row.message}"


def _telemetry_series(rows: list[Any]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"temperature C": [], "cpu %": [], "available GiB": [], "power W": []}
    for r in rows:
        temps = [float(v) for v in (r.temps_c or {}).values() if isinstance(v, int | float)]
        if temps:
            out["temperature C"].append(max(temps))
        if r.cpu_pct is not None:
            out["cpu %"].append(float(r.cpu_pct))
        if r.mem_available_bytes:
            out["available GiB"].append(round(r.mem_available_bytes / 1024**3, 2))
        power = [float(v) for v in (r.power_w or {}).values() if isinstance(v, int | float)]
        if power:
            out["power W"].append(round(sum(power), 2))
    # a virtual device's shim made these figures: the label says so
    tag = " (virtual)" if any(getattr(r, "virtual", None) for r in rows) else ""
    return {k + tag: v for k, v in out.items() if v}
