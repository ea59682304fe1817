"""Gate expressions on a run's metrics, parsed without eval: ``METRIC[.STAT] OP NUMBER[UNIT]``.

Examples: ``rtf_total.p95 < 1.0``, ``underruns == 0``, ``ttfa.p95 < 500ms``,
``deadline_miss_rate < 0.01``. Times are in milliseconds in the store; ``s`` and ``ms`` suffixes
convert. A metric the run did not produce fails the gate as unknown (never passes silently).
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any

from edgelab.errors import ConfigError

_OPS = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_EXPR = re.compile(
    r"^\s*(?P<metric>[a-z_][a-z0-9_]*)(?:\.(?P<stat>[a-z0-9_]+))?\s*(?P<op><=|>=|==|!=|<|>)\s*"
    r"(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<unit>ms|s|%)?\s*$"
)
STATS = ("p50", "p95", "min", "max", "mean", "count")

# name -> (path into the run summary, unit of the stored value: "ms" or None)
METRICS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "ttfa": (("audio", "ttfa_ms"), "ms"),
    "playback_start": (("audio", "playback_start_ms"), "ms"),
    "underruns": (("audio", "underruns_at_ttfa"), None),
    "requests_with_underrun": (("audio", "requests_with_underrun"), None),
    "stall": (("audio", "stall_ms_at_ttfa"), "ms"),
    "rtf_total": (("audio", "rtf_total"), None),
    "rtf_streamed": (("audio", "rtf_streamed"), None),
    "chunk_gaps": (("audio", "chunk_gaps_ms"), "ms"),
    "audio_s": (("audio", "audio_s"), None),
    "action_latency": (("action", "latency_ms"), "ms"),
    "obs_age": (("action", "age_ms"), "ms"),
    "deadline_misses": (("action", "deadline_misses"), None),
    "action_chunks": (("action", "chunks"), None),
    "stale_dropped": (("action", "stale_dropped"), None),
    "ttft": (("text", "ttft_ms"), "ms"),
    "decode_tok_s": (("text", "decode_tok_s"), None),
    "requests_failed": (("requests", "failed"), None),
    "requests": (("requests", "total"), None),
}
DERIVED = ("deadline_miss_rate", "errors")


@dataclass(frozen=True)
class Gate:
    text: str
    metric: str
    stat: str | None
    op: str
    value: float  # in the stored unit

    def describe(self) -> str:
        return self.text.strip()


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    ok: bool
    actual: float | None
    message: str


def parse_gate(text: str) -> Gate:
    """Parse one expression; ConfigError says what is wrong and what is known."""
    if not isinstance(text, str):
        raise ConfigError(f"a gate must be a string like 'rtf_total.p95 < 1.0', got {text!r}")
    m = _EXPR.match(text)
    if not m:
        raise ConfigError(
            f"cannot parse gate {text!r}: expected METRIC[.STAT] OP NUMBER[ms|s]",
            remedy="e.g. 'rtf_total.p95 < 1.0', 'underruns == 0', 'ttfa.p95 < 500ms'",
        )
    metric, stat, unit = m["metric"], m["stat"], m["unit"]
    if metric not in METRICS and metric not in DERIVED:
        raise ConfigError(
            f"unknown metric {metric!r} in gate {text!r}",
            remedy=f"known metrics: {', '.join([*METRICS, *DERIVED])}",
        )
    stored_unit = METRICS[metric][1] if metric in METRICS else None
    if stat is not None and stat not in STATS:
        raise ConfigError(
            f"unknown statistic {stat!r} in gate {text!r}", remedy=f"use one of {', '.join(STATS)}"
        )
    value = float(m["num"])
    if unit in ("ms", "s"):
        if stored_unit != "ms" or stat == "count":
            raise ConfigError(f"gate {text!r}: {metric} is not a time, it takes no unit {unit!r}")
        value = value * 1000.0 if unit == "s" else value
    elif unit == "%":
        if metric != "deadline_miss_rate":
            raise ConfigError(f"gate {text!r}: only a rate takes '%'")
        value /= 100.0
    return Gate(text=text, metric=metric, stat=stat, op=m["op"], value=value)


def _dig(summary: dict[str, Any], path: tuple[str, ...]) -> Any:
    cur: Any = summary
    for key in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur


def metric_value(summary: dict[str, Any], gate: Gate) -> float | None:
    if gate.metric == "deadline_miss_rate":
        misses, chunks = _dig(summary, ("action", "deadline_misses")), _dig(summary, ("action", "chunks"))
        return None if misses is None or not chunks else misses / chunks
    if gate.metric == "errors":
        errs = summary.get("errors")
        return float(sum(errs.values())) if isinstance(errs, dict) else None
    raw = _dig(summary, METRICS[gate.metric][0])
    if isinstance(raw, dict):  # a distribution: {count, p50, p95, ...}
        return raw.get(gate.stat or "p95")
    if gate.stat is not None:
        return None
    return raw


def evaluate(gate: Gate, summary: dict[str, Any] | None) -> GateResult:
    actual = metric_value(summary or {}, gate)
    if actual is None:
        return GateResult(
            gate, False, None, f"{gate.describe()}: no value (the run did not produce {gate.metric})"
        )
    ok = bool(_OPS[gate.op](float(actual), gate.value))
    unit = " ms" if METRICS.get(gate.metric, ((), None))[1] == "ms" and gate.stat != "count" else ""
    word = "ok" if ok else "FAILED"
    return GateResult(gate, ok, float(actual), f"{gate.describe()}: {word} (actual {actual:.4g}{unit})")
