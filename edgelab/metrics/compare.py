"""Did B get faster or slower than A, and is that real? The statistics of a comparison, pure.

For one metric, A (the baseline side) and B are the raw per-request values (a TTFA per request,
a decode rate per request, a latency per action chunk), never summaries. The estimate is the
ratio of the sample medians, B / A (a median of an even count is the midpoint of the middle two);
its interval is a seeded percentile bootstrap: both sides resampled with replacement, the ratio
recomputed each time, the central ``confidence`` share of those ratios kept. The verdict reads
the interval against 1 in the metric's better direction: an interval wholly on the worse side
is ``slower``, wholly on the better side ``faster``, one that holds 1 is ``no difference`` at
that confidence. Medians, not means: one stalled request in twenty must not decide a nightly gate.

Only numpy; nothing here reads the store or prints (edgelab.metrics.runsets and the CLI do).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DEFAULT_CONFIDENCE = 0.99
DEFAULT_RESAMPLES = 4000
DEFAULT_SEED = 0
MIN_SAMPLES = 5  # per side: below it no interval is drawn and the verdict is "unknown"

FASTER, SLOWER, SAME, UNKNOWN = "faster", "slower", "no difference", "unknown"
VERDICTS = (FASTER, SLOWER, SAME, UNKNOWN)


@dataclass(frozen=True)
class Metric:
    """A comparable figure: its name (as gates spell it), unit and which direction is better."""

    name: str
    label: str
    unit: str | None  # "ms" or None
    better: str  # "lower" | "higher"


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("ttfa", "TTFA", "ms", "lower"),
        Metric("playback_start", "playback start", "ms", "lower"),
        Metric("rtf_streamed", "RTF streamed", None, "lower"),
        Metric("rtf_total", "RTF total", None, "lower"),
        Metric("request_wall", "request wall time", "ms", "lower"),
        Metric("ttft", "TTFT", "ms", "lower"),
        Metric("itl", "inter-token (request p50)", "ms", "lower"),
        Metric("decode_tok_s", "decode tokens/s", None, "higher"),
        Metric("action_latency", "action latency", "ms", "lower"),
        Metric("obs_age", "observation age", "ms", "lower"),
        Metric("codec_first_frame", "first codec frame", "ms", "lower"),
    )
}


def metric(name: str) -> Metric:
    """A known metric, or one named by llama-bench's test (``tok_s_tg8``: tokens/s, higher is better)."""
    if name in METRICS:
        return METRICS[name]
    if name.startswith("tok_s_"):
        return Metric(name, f"llama-bench {name[6:]} tokens/s", None, "higher")
    raise KeyError(name)


@dataclass(frozen=True)
class Side:
    """One side's distribution as reported elsewhere in edgelab: nearest-rank p50/p95 with its count."""

    count: int
    p50: float | None
    p95: float | None
    median: float | None  # numpy's (midpoint) median: what the ratio is of

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "p50": self.p50, "p95": self.p95, "median": self.median}


@dataclass(frozen=True)
class Result:
    """One metric compared: both sides, the ratio B/A of medians, its interval, the verdict."""

    metric: Metric
    a: Side
    b: Side
    ratio: float | None
    low: float | None
    high: float | None
    confidence: float
    verdict: str
    why: str = ""  # for "unknown": what was missing
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def change_pct(self) -> float | None:
        """How much worse (+) or better (-) B is, in per cent of A, in the metric's own sense."""
        if self.ratio is None:
            return None
        return (self.ratio - 1.0) * 100.0 if self.metric.better == "lower" else (1.0 - self.ratio) * 100.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric.name,
            "label": self.metric.label,
            "unit": self.metric.unit,
            "better": self.metric.better,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "ratio": self.ratio,
            "interval": [self.low, self.high] if self.low is not None else None,
            "confidence": self.confidence,
            "verdict": self.verdict,
            "why": self.why or None,
        }


def _nearest(sorted_vals: np.ndarray, p: float) -> float:
    rank = max(1, int(np.ceil(p / 100.0 * len(sorted_vals) - 1e-9)))
    return float(sorted_vals[rank - 1])


def side(values: Sequence[float]) -> Side:
    v = np.sort(np.asarray([x for x in values if x is not None], dtype=float))
    if not len(v):
        return Side(0, None, None, None)
    return Side(len(v), _nearest(v, 50), _nearest(v, 95), float(np.median(v)))


def bootstrap_ratio(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float, float]:
    """(median(b)/median(a), low, high): the percentile bootstrap interval of the ratio of medians.

    Deterministic for a seed. Both sides must hold values and a median other than 0."""
    if not 0.5 <= confidence < 1.0:
        raise ValueError(f"confidence {confidence} is outside [0.5, 1)")
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ma, mb = float(np.median(xa)), float(np.median(xb))
    if ma == 0.0:
        raise ZeroDivisionError("the median of A is 0: a ratio says nothing")
    rng = np.random.default_rng(seed)
    ra = np.median(xa[rng.integers(0, len(xa), size=(resamples, len(xa)))], axis=1)
    rb = np.median(xb[rng.integers(0, len(xb), size=(resamples, len(xb)))], axis=1)
    ok = ra != 0.0
    ratios = rb[ok] / ra[ok]
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return mb / ma, float(low), float(high)


def judge(low: float, high: float, better: str, threshold: float = 0.0) -> str:
    """The verdict of an interval of B/A: wholly past 1 (+/- ``threshold``) on the worse side is
    slower, on the better side faster; otherwise no difference at that confidence."""
    worse_above = better == "lower"
    if low > 1.0 + threshold:
        return SLOWER if worse_above else FASTER
    if high < 1.0 - threshold:
        return FASTER if worse_above else SLOWER
    return SAME


def compare_values(
    m: Metric,
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    threshold: float = 0.0,
) -> Result:
    """One metric's comparison from raw values (None entries are unknown and skipped)."""
    va = [float(x) for x in a if x is not None]
    vb = [float(x) for x in b if x is not None]
    sa, sb = side(va), side(vb)

    def unknown(why: str, ratio: float | None = None) -> Result:
        return Result(m, sa, sb, ratio, None, None, confidence, UNKNOWN, why)

    if len(va) < MIN_SAMPLES or len(vb) < MIN_SAMPLES:
        return unknown(f"too few samples (A {len(va)}, B {len(vb)}; at least {MIN_SAMPLES} a side)")
    if sa.median == 0.0:
        return unknown("the median of A is 0: no ratio")
    ratio, low, high = bootstrap_ratio(va, vb, confidence=confidence, resamples=resamples, seed=seed)
    return Result(m, sa, sb, ratio, low, high, confidence, judge(low, high, m.better, threshold))


def compare_samples(
    a: dict[str, list[float]],
    b: dict[str, list[float]],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    threshold: float = 0.0,
    only: Sequence[str] | None = None,
) -> list[Result]:
    """Every metric either side has (or ``only`` those), in the catalogue's order."""
    names = [n for n in dict.fromkeys([*a, *b]) if only is None or n in only]
    order = {n: i for i, n in enumerate(METRICS)}
    names.sort(key=lambda n: (order.get(n, len(order)), n))
    out = []
    for name in names:
        try:
            m = metric(name)
        except KeyError:
            continue
        out.append(
            compare_values(
                m,
                a.get(name, []),
                b.get(name, []),
                confidence=confidence,
                resamples=resamples,
                seed=seed,
                threshold=threshold,
            )
        )
    return out
