"""Streaming-audio metrics of one request, exactly as DESIGN §5 defines them.

Input is the request's chunk list: arrival time t_i (ms since the request was sent) and
sample count n_i. Only chunks with samples count. C_i is the audio (ms) delivered before
chunk i. A player started at S needs chunk i at S + C_i (+ stalls so far); a later
arrival is an underrun that stalls playback by the difference.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from edgelab.metrics.stats import summarize

QWEN3_TTS_SR = 24000
QWEN3_TTS_FRAME_SAMPLES = 1920  # 80 ms at 24 kHz, 12.5 Hz codec
EPS_MS = 1e-6  # a chunk "late" by float rounding only is on time


@dataclass(frozen=True, slots=True)
class Chunk:
    t_ms: float
    samples: int
    sr: int = QWEN3_TTS_SR
    sentence: int | None = None  # the sentence of a split utterance it belongs to (None: not split)


@dataclass
class AudioMetrics:
    """Per-request audio figures; None where the request gave no audio (unknown, not zero)."""

    chunks: int = 0  # chunks with samples
    audio_ms: float = 0.0
    ttfa_ms: float | None = None
    playback_start_ms: float | None = None
    underruns_at_ttfa: int | None = None
    stall_ms_at_ttfa: float | None = None
    last_chunk_ms: float | None = None
    rtf_streamed: float | None = None
    rtf_total: float | None = None
    wall_ms: float | None = None
    chunk_gaps_ms: list[float] = field(default_factory=list)

    def as_dict(self, gaps: bool = False) -> dict[str, Any]:
        """A plain dict; the gap list (derivable from the raw chunks) is summarized unless ``gaps``."""
        d = {f: getattr(self, f) for f in _SCALARS}
        d["chunk_gaps_ms"] = list(self.chunk_gaps_ms) if gaps else summarize(self.chunk_gaps_ms)
        return d


_SCALARS = tuple(f.name for f in fields(AudioMetrics) if f.name != "chunk_gaps_ms")


def audio_chunks(chunks: Iterable[Chunk]) -> list[Chunk]:
    """The chunks that carry audio, in arrival order (the order given: a stream's delivery order)."""
    return [c for c in chunks if c.samples > 0]


def underruns(chunks: Sequence[Chunk], start_ms: float) -> tuple[int, float]:
    """Ring-buffer player started at ``start_ms``: (number of stalls, total stall ms)."""
    count, stall, shift, c_ms = 0, 0.0, 0.0, 0.0
    for ch in audio_chunks(chunks):
        needed = start_ms + c_ms + shift
        if ch.t_ms > needed + EPS_MS:
            gap = ch.t_ms - needed
            count += 1
            stall += gap
            shift += gap
        c_ms += ch.samples * 1000.0 / ch.sr
    return count, stall


def playback_start(chunks: Sequence[Chunk]) -> float | None:
    """max_i (t_i - C_i): the earliest start that never underruns (>= TTFA)."""
    best, c_ms = None, 0.0
    for ch in audio_chunks(chunks):
        v = ch.t_ms - c_ms
        best = v if best is None or v > best else best
        c_ms += ch.samples * 1000.0 / ch.sr
    return best


def audio_metrics(chunks: Iterable[Chunk], wall_ms: float | None = None) -> AudioMetrics:
    """Every audio figure of one request, recomputed from its raw chunks (the batch path)."""
    audio = audio_chunks(chunks)
    m = AudioMetrics(wall_ms=wall_ms)
    if not audio:
        return m
    m.chunks = len(audio)
    m.audio_ms = sum(c.samples * 1000.0 / c.sr for c in audio)
    m.ttfa_ms = audio[0].t_ms
    m.playback_start_ms = playback_start(audio)
    m.underruns_at_ttfa, m.stall_ms_at_ttfa = underruns(audio, m.ttfa_ms)
    m.last_chunk_ms = audio[-1].t_ms
    m.chunk_gaps_ms = [b.t_ms - a.t_ms for a, b in zip(audio, audio[1:], strict=False)]
    if m.audio_ms > 0:
        m.rtf_streamed = m.last_chunk_ms / m.audio_ms
        if wall_ms is not None:
            m.rtf_total = wall_ms / m.audio_ms
    return m


@dataclass
class SentenceTiming:
    """One sentence of an utterance, times in ms since the utterance was sent.

    ``ttfa_ms`` is the sentence's first audio; ``gap_ms`` the silence a player hears before
    it: its first audio minus the previous sentence's last audio (None for the first sentence).
    """

    index: int
    chunks: int
    audio_ms: float
    ttfa_ms: float | None
    last_chunk_ms: float | None
    gap_ms: float | None

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def sentence_timings(chunks: Iterable[Chunk]) -> list[SentenceTiming]:
    """Per-sentence figures of one utterance from its chunks' ``sentence`` tags, in sentence order.

    The utterance's own TTFA is the first sentence's; ``gap_ms`` of the later ones are the
    between-sentence gaps (a per-sentence request pays its start-up again: it shows here).
    """
    by: dict[int, list[Chunk]] = {}
    for c in chunks:
        if c.sentence is not None:
            by.setdefault(c.sentence, [])
            if c.samples > 0:
                by[c.sentence].append(c)
    out: list[SentenceTiming] = []
    prev_last: float | None = None
    for i in sorted(by):
        audio = by[i]
        first = audio[0].t_ms if audio else None
        last = audio[-1].t_ms if audio else None
        gap = None if (prev_last is None or first is None) else first - prev_last
        out.append(
            SentenceTiming(i, len(audio), sum(c.samples * 1000.0 / c.sr for c in audio), first, last, gap)
        )
        prev_last = last if last is not None else prev_last
    return out


def schedule_arrivals(
    schedule: Sequence[int],
    total_frames: int,
    frames_per_s: float,
    latency_ms: float = 0.0,
    frame_samples: int = QWEN3_TTS_FRAME_SAMPLES,
    sr: int = QWEN3_TTS_SR,
) -> list[Chunk]:
    """Chunks of a producer making ``frames_per_s`` codec frames that emits a chunk when the
    schedule's next size is complete (the last size repeats; the tail is a short chunk).

    A model of the talker for chunk-schedule questions such as 1 -> 25 versus 2,4,8,16,25.
    """
    if frames_per_s <= 0:
        raise ValueError("frames_per_s must be positive")
    out: list[Chunk] = []
    done, k = 0, 0
    while done < total_frames:
        size = schedule[min(k, len(schedule) - 1)]
        size = min(size, total_frames - done)
        done += size
        out.append(Chunk(t_ms=latency_ms + done * 1000.0 / frames_per_s, samples=size * frame_samples, sr=sr))
        k += 1
    return out
