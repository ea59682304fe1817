"""Incremental aggregation fed event by event, and the batch recompute it must agree with.

The live path (``RunAggregator``) keeps O(1) state per audio chunk so the live view can
show TTFA, underruns and RTF while a run goes; the batch path (``recompute``) derives the
same figures from the raw samples at the end with the plain definitions in audio.py,
action.py and text.py. Both end in ``run_summary`` so equal inputs give equal numbers;
the tests hold them to it. Chunks are taken in arrival order (the order a stream delivers).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from edgelab.metrics import events as ev
from edgelab.metrics.action import ActionSample, ActionVerdict, judge, verdicts_summary
from edgelab.metrics.audio import EPS_MS, AudioMetrics, Chunk, audio_metrics
from edgelab.metrics.reported import summary as reported_summary
from edgelab.metrics.stats import summarize
from edgelab.metrics.text import text_metrics
from edgelab.states import RunState

HEADLINE_PHASES = ("measured",)


class LiveAudio:
    """One request's audio figures, updated per chunk (same arithmetic as audio.audio_metrics)."""

    __slots__ = ("n", "c_ms", "ttfa", "pb", "shift", "under", "stall", "last", "gaps")

    def __init__(self) -> None:
        self.n = 0
        self.c_ms = 0.0
        self.ttfa: float | None = None
        self.pb: float | None = None
        self.shift = 0.0
        self.under = 0
        self.stall = 0.0
        self.last: float | None = None
        self.gaps: list[float] = []

    def add(self, t_ms: float, samples: int, sr: int) -> None:
        if samples <= 0:
            return
        if self.ttfa is None:
            self.ttfa = t_ms
        else:
            self.gaps.append(t_ms - self.last)
        v = t_ms - self.c_ms
        if self.pb is None or v > self.pb:
            self.pb = v
        needed = self.ttfa + self.c_ms + self.shift
        if t_ms > needed + EPS_MS:
            self.under += 1
            self.stall += t_ms - needed
            self.shift += t_ms - needed
        self.c_ms += samples * 1000.0 / sr
        self.last = t_ms
        self.n += 1

    def metrics(self, wall_ms: float | None) -> AudioMetrics:
        m = AudioMetrics(wall_ms=wall_ms)
        if not self.n:
            return m
        m.chunks, m.audio_ms, m.ttfa_ms, m.playback_start_ms = self.n, self.c_ms, self.ttfa, self.pb
        m.underruns_at_ttfa, m.stall_ms_at_ttfa = self.under, self.stall
        m.last_chunk_ms, m.chunk_gaps_ms = self.last, list(self.gaps)
        if m.audio_ms > 0:
            m.rtf_streamed = self.last / m.audio_ms
            if wall_ms is not None:
                m.rtf_total = wall_ms / m.audio_ms
        return m


def codec_metrics(frames: list[tuple[float, int]]) -> dict[str, Any] | None:
    """(t_ms since the request was sent, frames) per codec message, in arrival order: time to the first
    frame, frames, and production rate after the first message (frames/s; RTF = 12.5 / rate for Qwen3-TTS)."""
    got = [(t, n) for t, n in frames if n > 0]
    if not got:
        return None
    total = sum(n for _, n in got)
    span_ms = got[-1][0] - got[0][0]
    after = total - got[0][1]
    return {
        "frames": total,
        "first_frame_ms": got[0][0],
        "frames_per_s": after / (span_ms / 1000.0) if span_ms > 0 and after > 0 else None,
    }


@dataclass
class RequestView:
    """What run_summary needs of one request, from either path."""

    request: str
    phase: str
    band: str | None
    ok: bool | None
    audio: AudioMetrics | None
    text: dict[str, Any] | None
    codec: dict[str, Any] | None = None


def wall_ms(submitted: float, finished: float | None) -> float | None:
    return None if finished is None else (finished - submitted) * 1000.0


def request_metrics(view: RequestView) -> dict[str, Any]:
    """The per-request record stored on run_request.metrics."""
    return {
        "audio": view.audio.as_dict() if view.audio is not None else None,
        "text": view.text,
        "codec": view.codec,
    }


class ResourceAgg:
    """Peaks and troughs of a run's telemetry: what the figures were measured under."""

    __slots__ = (
        "n",
        "peak_rss",
        "min_avail",
        "max_cpu",
        "max_gpu",
        "temps",
        "power",
        "clocks_min",
        "throttled",
    )

    def __init__(self) -> None:
        self.n = 0
        self.peak_rss: int | None = None
        self.min_avail: int | None = None
        self.max_cpu: float | None = None
        self.max_gpu: float | None = None
        self.temps: dict[str, float] = {}
        self.power: dict[str, float] = {}
        self.clocks_min: dict[str, float] = {}
        self.throttled: bool | None = None

    def add(
        self,
        rss: int | None,
        avail: int | None,
        cpu: float | None,
        gpu: float | None,
        temps: dict[str, float] | None,
        power: dict[str, float] | None,
        clocks: dict[str, float] | None,
        throttled: bool | None,
    ) -> None:
        self.n += 1
        if rss is not None and (self.peak_rss is None or rss > self.peak_rss):
            self.peak_rss = rss
        if avail is not None and (self.min_avail is None or avail < self.min_avail):
            self.min_avail = avail
        if cpu is not None and (self.max_cpu is None or cpu > self.max_cpu):
            self.max_cpu = cpu
        if gpu is not None and (self.max_gpu is None or gpu > self.max_gpu):
            self.max_gpu = gpu
        for k, v in (temps or {}).items():
            if k not in self.temps or v > self.temps[k]:
                self.temps[k] = v
        for k, v in (power or {}).items():
            if k not in self.power or v > self.power[k]:
                self.power[k] = v
        for k, v in (clocks or {}).items():
            if k not in self.clocks_min or v < self.clocks_min[k]:
                self.clocks_min[k] = v
        if throttled is not None:
            self.throttled = bool(self.throttled) or throttled

    def summary(self) -> dict[str, Any] | None:
        if not self.n:
            return None
        return {
            "samples": self.n,
            "peak_rss_bytes": self.peak_rss,
            "min_mem_available_bytes": self.min_avail,
            "max_cpu_pct": self.max_cpu,
            "max_gpu_util_pct": self.max_gpu,
            "max_temp_c": dict(sorted(self.temps.items())),
            "max_power_w": dict(sorted(self.power.items())),
            "min_clock_mhz": dict(sorted(self.clocks_min.items())),
            "throttled": self.throttled,
        }


def run_summary(
    requests: list[RequestView],
    verdicts: list[ActionVerdict],
    period_s: float | None,
    errors: dict[str, int],
    stages: dict[str, list[float]] | None = None,
    resources: ResourceAgg | None = None,
) -> dict[str, Any]:
    """The run's figures. Headline figures use measured requests (all, if none is marked measured)."""
    phases: dict[str, int] = {}
    for r in requests:
        phases[r.phase] = phases.get(r.phase, 0) + 1
    head = [r for r in requests if r.phase in HEADLINE_PHASES] or [r for r in requests if r.phase != "warmup"]
    audio = [r.audio for r in head if r.audio is not None and r.audio.chunks]
    texts = [r.text for r in head if r.text is not None and r.text["tokens"]]
    codecs = [r.codec for r in head if r.codec is not None]
    out: dict[str, Any] = {
        "requests": {
            "total": len(requests),
            "by_phase": phases,
            "failed": sum(1 for r in requests if r.ok is False),
            "open": sum(1 for r in requests if r.ok is None),
        },
        "errors": dict(errors),
        "audio": None,
        "action": None,
        "text": None,
        "codec": None,
        "stages_ms": {k: summarize(v) for k, v in sorted((stages or {}).items())} or None,
        "resources": resources.summary() if resources is not None else None,
    }
    if audio:
        gaps = [g for a in audio for g in a.chunk_gaps_ms]
        bands: dict[str, list[AudioMetrics]] = {}
        for r in head:
            if r.band is not None and r.audio is not None and r.audio.chunks:
                bands.setdefault(r.band, []).append(r.audio)
        out["audio"] = {
            "requests": len(audio),
            "ttfa_ms": summarize(a.ttfa_ms for a in audio),
            "playback_start_ms": summarize(a.playback_start_ms for a in audio),
            "underruns_at_ttfa": sum(a.underruns_at_ttfa for a in audio),
            "requests_with_underrun": sum(1 for a in audio if a.underruns_at_ttfa),
            "stall_ms_at_ttfa": summarize(a.stall_ms_at_ttfa for a in audio),
            "rtf_streamed": summarize(a.rtf_streamed for a in audio),
            "rtf_total": summarize(a.rtf_total for a in audio),
            "chunk_gaps_ms": summarize(gaps),
            "audio_s": sum(a.audio_ms for a in audio) / 1000.0,
            "by_band": {
                b: {
                    "requests": len(xs),
                    "ttfa_ms": summarize(a.ttfa_ms for a in xs),
                    "playback_start_ms": summarize(a.playback_start_ms for a in xs),
                    "underruns_at_ttfa": sum(a.underruns_at_ttfa for a in xs),
                    "rtf_streamed": summarize(a.rtf_streamed for a in xs),
                }
                for b, xs in sorted(bands.items())
            }
            or None,
        }
    if verdicts:
        if period_s:
            out["action"] = verdicts_summary(verdicts, period_s)
        else:
            out["action"] = {
                "chunks": len(verdicts),
                "control_period_ms": None,
                "latency_ms": summarize(v.latency_ms for v in verdicts),
                "age_ms": summarize(v.age_ms for v in verdicts),
                "deadline_misses": None,
                "stale_aligned": None,
                "stale_dropped": None,
            }
    if codecs:
        out["codec"] = {
            "requests": len(codecs),
            "first_frame_ms": summarize(c["first_frame_ms"] for c in codecs),
            "frames_per_s": summarize(c["frames_per_s"] for c in codecs),
        }
    if texts:
        out["text"] = {
            "requests": len(texts),
            "ttft_ms": summarize(t["ttft_ms"] for t in texts),
            "itl_ms_p50": summarize(t["itl_ms"]["p50"] for t in texts),
            "decode_tok_s": summarize(t["decode_tok_s"] for t in texts),
        }
    return out


@dataclass
class _Req:
    submitted: float
    phase: str
    band: str | None
    finished: float | None = None
    ok: bool | None = None
    audio: LiveAudio = field(default_factory=LiveAudio)
    tokens: list[tuple[float, int]] = field(default_factory=list)
    codec: list[tuple[float, int]] = field(default_factory=list)
    view: RequestView | None = None  # cached until the request's next event


class RunAggregator:
    """Feed events in arrival order; ``summary()`` at any moment gives the run's figures so far."""

    def __init__(self, period_s: float | None = None, staleness_s: float | None = None):
        self.period_s = period_s
        self.staleness_s = staleness_s
        self.requests: dict[str, _Req] = {}
        self.verdicts: list[ActionVerdict] = []
        self.errors: dict[str, int] = {}
        self.last_resource: dict[str | None, ev.ResourceSample] = {}
        self.stages: dict[str, list[float]] = {}
        self.resources = ResourceAgg()
        self.state = RunState.PENDING
        self.events = 0
        self._dispatch = {
            ev.AudioChunk: self._audio,
            ev.RequestStart: self._req_start,
            ev.RequestEnd: self._req_end,
            ev.ActionChunk: self._action,
            ev.TextToken: self._token,
            ev.ResourceSample: self._resource,
            ev.ErrorEvent: self._error,
            ev.RunStart: self._run_start,
            ev.RunEnd: self._run_end,
            ev.StageTiming: self._stage,
            ev.CodecFrames: self._codec,
        }

    def feed(self, e: ev.Event) -> None:
        self.events += 1
        fn = self._dispatch.get(type(e))
        if fn is not None:
            fn(e)

    def feed_all(self, events: Iterable[ev.Event]) -> RunAggregator:
        for e in events:
            self.feed(e)
        return self

    def _req(self, name: str, t: float) -> _Req:
        r = self.requests.get(name)
        if r is None:  # a chunk for a request never announced: it starts at its first event
            r = self.requests[name] = _Req(submitted=t, phase="measured", band=None)
        return r

    def _run_start(self, e: ev.RunStart) -> None:
        self.state = RunState.RUNNING
        p = e.meta.get("control_period_s")
        if p is None and e.meta.get("control_hz"):
            p = 1.0 / float(e.meta["control_hz"])
        if p is not None:
            self.period_s = float(p)
        if e.meta.get("staleness_s") is not None:
            self.staleness_s = float(e.meta["staleness_s"])

    def _run_end(self, e: ev.RunEnd) -> None:
        self.state = e.state

    def _req_start(self, e: ev.RequestStart) -> None:
        self.requests[e.request] = _Req(submitted=e.t, phase=e.phase, band=e.band)

    def _req_end(self, e: ev.RequestEnd) -> None:
        r = self._req(e.request, e.t)
        r.finished, r.ok, r.view = e.t, e.ok, None

    def _audio(self, e: ev.AudioChunk) -> None:
        r = self._req(e.request, e.t)
        r.view = None
        r.audio.add((e.t - r.submitted) * 1000.0, e.samples, e.sample_rate)

    def _codec(self, e: ev.CodecFrames) -> None:
        r = self._req(e.request, e.t)
        r.view = None
        r.codec.append(((e.t - r.submitted) * 1000.0, e.n_frames))

    def _token(self, e: ev.TextToken) -> None:
        r = self._req(e.request, e.t)
        r.view = None
        r.tokens.append((e.t, e.n))

    def _action(self, e: ev.ActionChunk) -> None:
        r = self.requests.get(e.request) if e.request else None
        if r is not None and r.phase == "warmup":
            return
        s = ActionSample(e.t, e.obs_t, e.infer_start, e.infer_end, e.horizon)
        self.verdicts.append(
            judge(s, self.period_s or 0.0, self.staleness_s)
            if self.period_s
            else ActionVerdict(_lat(s), _age(s), None, None, None)
        )

    def _resource(self, e: ev.ResourceSample) -> None:
        self.last_resource[e.device] = e
        self.resources.add(
            e.rss_bytes,
            e.mem_available_bytes,
            e.cpu_pct,
            e.gpu_util_pct,
            e.temps_c,
            e.power_w,
            e.clocks_mhz,
            e.throttled,
        )

    def _stage(self, e: ev.StageTiming) -> None:
        if e.start is not None and e.end is not None:
            self.stages.setdefault(e.stage, []).append((e.end - e.start) * 1000.0)

    def _error(self, e: ev.ErrorEvent) -> None:
        self.errors[e.cls] = self.errors.get(e.cls, 0) + 1

    def request_view(self, name: str) -> RequestView:
        r = self.requests[name]
        if r.view is None:
            r.view = RequestView(
                name,
                r.phase,
                r.band,
                r.ok,
                r.audio.metrics(wall_ms(r.submitted, r.finished)),
                text_metrics(r.tokens, r.submitted) if r.tokens else None,
                codec_metrics(r.codec),
            )
        return r.view

    def summary(self) -> dict[str, Any]:
        views = [self.request_view(n) for n in self.requests]
        return run_summary(views, self.verdicts, self.period_s, self.errors, self.stages, self.resources)


def _lat(s: ActionSample) -> float | None:
    return None if s.infer_start is None or s.infer_end is None else (s.infer_end - s.infer_start) * 1000.0


def _age(s: ActionSample) -> float | None:
    return None if s.obs_t is None else (s.t - s.obs_t) * 1000.0


def recompute(
    requests: Iterable[Any],
    samples: Iterable[Any],
    period_s: float | None,
    staleness_s: float | None = None,
    errors: dict[str, int] | None = None,
    stages: Iterable[tuple[str, float | None, float | None]] = (),
    telemetry: Iterable[Any] = (),
) -> dict[str, Any]:
    """The batch path: the run's figures from stored rows (RunRequest-like and RunSample-like
    objects with the same attribute names; stage (name, start, end) triples; TelemetrySample-like
    rows), using the plain definitions, not the live state."""
    reqs = list(requests)
    phase = {r.request: r.phase for r in reqs}
    chunks: dict[str, list[Chunk]] = {r.request: [] for r in reqs}
    tokens: dict[str, list[tuple[float, int]]] = {r.request: [] for r in reqs}
    codec: dict[str, list[tuple[float, int]]] = {r.request: [] for r in reqs}
    verdicts: list[ActionVerdict] = []
    for s in samples:
        if s.kind == "audio":
            chunks.setdefault(s.request, []).append(Chunk(s.t_ms, s.n or 0, s.sample_rate or 24000))
        elif s.kind == "codec":
            codec.setdefault(s.request, []).append((s.t_ms, s.n or 0))
        elif s.kind == "text":
            tokens.setdefault(s.request, []).append((s.t, s.n or 1))
        elif s.kind == "action":
            if s.request and phase.get(s.request) == "warmup":
                continue
            a = ActionSample(s.t, s.obs_t, s.infer_start, s.infer_end, s.horizon)
            verdicts.append(
                judge(a, period_s, staleness_s)
                if period_s
                else ActionVerdict(_lat(a), _age(a), None, None, None)
            )
    views = []
    for r in reqs:
        toks = tokens.get(r.request) or []
        views.append(
            RequestView(
                r.request,
                r.phase,
                r.band,
                r.ok,
                audio_metrics(chunks.get(r.request, []), wall_ms(r.submitted, r.finished)),
                text_metrics(toks, r.submitted) if toks else None,
                codec_metrics(codec.get(r.request, [])),
            )
        )
    durations: dict[str, list[float]] = {}
    for name, start, end in stages:
        if start is not None and end is not None:
            durations.setdefault(name, []).append((end - start) * 1000.0)
    res = ResourceAgg()
    for r in telemetry:
        res.add(
            r.rss_bytes,
            r.mem_available_bytes,
            r.cpu_pct,
            r.gpu_util_pct,
            r.temps_c,
            r.power_w,
            r.clocks_mhz,
            r.throttled,
        )
    out = run_summary(views, verdicts, period_s, errors or {}, durations, res)
    own = reported_summary(reqs)
    if own is not None:  # what a one-shot program reported about itself (llama-completion, llama-bench)
        out["reported"] = own
    return out
