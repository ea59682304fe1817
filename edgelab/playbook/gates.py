"""Gate expressions on a run's metrics, parsed without eval: ``METRIC[.STAT] OP NUMBER[UNIT]``.

Examples: ``rtf_total.p95 < 1.0``, ``underruns == 0``, ``ttfa.p95 < 500ms``,
``deadline_miss_rate < 0.01``. Times are in milliseconds in the store; ``s`` and ``ms`` suffixes
convert. A metric the run did not produce fails the gate as unknown (never passes silently).

Relative to a baseline (the gate step's ``baseline: NAME``): ``decode_tok_s.p50 >= baseline * 0.95``,
``ttfa.p95 <= baseline + 20ms``, ``rtf_total.p50 <= baseline``; the baseline's figure is the same
statistic over its runs' pooled raw values. And the comparison's verdict at the step's confidence
(edgelab.metrics.compare, the run against the baseline): ``slower == false`` (no metric is slower),
``ttfa.slower == false``, ``decode_tok_s.faster == true``.
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
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_EXPR = re.compile(
    r"^\s*(?P<metric>[a-z_][a-z0-9_]*)(?:\.(?P<stat>[a-z0-9_]+))?\s*(?P<op><=|>=|==|!=|<|>)\s*"
    rf"(?:(?P<num>{_NUM})\s*(?P<unit>ms|s|%)?"
    rf"|(?P<base>baseline)(?:\s*(?P<rop>[*+-])\s*(?P<rnum>{_NUM})\s*(?P<runit>ms|s)?)?"
    r"|(?P<bool>true|false))\s*$"
)
VERDICT_WORDS = ("slower", "faster")
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
    value: float  # in the stored unit (relative: the factor of ``*``, the offset of ``+``/``-``)
    relative: str | None = None  # "=" (baseline), "*", "+", "-": judged against a baseline's figure
    verdict: str | None = None  # "slower" | "faster": the comparison's verdict, ``value`` 1.0 (true) or 0.0

    def describe(self) -> str:
        return self.text.strip()

    @property
    def needs_baseline(self) -> bool:
        return self.relative is not None or self.verdict is not None


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
    if m["bool"] is not None or metric in VERDICT_WORDS or stat in VERDICT_WORDS:
        return _verdict_gate(text, m)
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
    if m["base"] is not None:
        return _relative_gate(text, m, stored_unit)
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


def _verdict_gate(text: str, m: re.Match[str]) -> Gate:
    """``slower == false``, ``METRIC.slower == false``, ``METRIC.faster == true``."""
    metric, stat = m["metric"], m["stat"]
    word, which = (metric, None) if metric in VERDICT_WORDS else (stat, metric)
    if word not in VERDICT_WORDS or m["bool"] is None or m["op"] not in ("==", "!="):
        raise ConfigError(
            f"cannot parse gate {text!r}: a verdict gate is [METRIC.]slower|faster == true|false",
            remedy="e.g. 'slower == false' or 'ttfa.slower == false'",
        )
    if which is not None:
        from edgelab.metrics.compare import metric as compare_metric

        try:
            compare_metric(which)
        except KeyError:
            raise ConfigError(
                f"gate {text!r}: {which} has no per-request values to compare",
                remedy="use ttfa, playback_start, rtf_streamed, rtf_total, ttft, itl, decode_tok_s, action_latency, obs_age",
            ) from None
    return Gate(text, which or "*", None, m["op"], 1.0 if m["bool"] == "true" else 0.0, verdict=word)


def _relative_gate(text: str, m: re.Match[str], stored_unit: str | None) -> Gate:
    """``METRIC[.STAT] OP baseline [* F | + N[ms|s] | - N[ms|s]]``."""
    rop = m["rop"] or "="
    value = float(m["rnum"]) if m["rnum"] is not None else 0.0
    if m["runit"] in ("ms", "s"):
        if rop == "*":
            raise ConfigError(f"gate {text!r}: a factor takes no unit", remedy="e.g. 'baseline * 0.95'")
        if stored_unit != "ms":
            raise ConfigError(f"gate {text!r}: {m['metric']} is not a time, it takes no unit {m['runit']!r}")
        value = value * 1000.0 if m["runit"] == "s" else value
    if m["metric"] in DERIVED:
        raise ConfigError(f"gate {text!r}: {m['metric']} cannot be judged against a baseline")
    return Gate(text, m["metric"], m["stat"], m["op"], value, relative=rop)


@dataclass
class BaselineFigures:
    """What relative and verdict gates judge against: the baseline's name and runs, each metric's
    pooled distribution ({count, p50, p95, ...} by gate name) and the comparison of the run with it."""

    name: str
    runs: list[str]
    figures: dict[str, Any]
    comparison: Any = None  # edgelab.metrics.runsets.Comparison (A = baseline, B = the run)
    confidence: float = 0.99

    def label(self) -> str:
        return f"baseline {self.name} (run{'s' if len(self.runs) != 1 else ''} {', '.join(self.runs)})"


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


def evaluate(
    gate: Gate, summary: dict[str, Any] | None, baseline: BaselineFigures | None = None
) -> GateResult:
    if gate.needs_baseline:
        if baseline is None:
            return GateResult(gate, False, None, f"{gate.describe()}: no baseline to judge against")
        if gate.verdict is not None:
            return _evaluate_verdict(gate, baseline)
        return _evaluate_relative(gate, summary, baseline)
    actual = metric_value(summary or {}, gate)
    if actual is None:
        return GateResult(
            gate, False, None, f"{gate.describe()}: no value (the run did not produce {gate.metric})"
        )
    ok = bool(_OPS[gate.op](float(actual), gate.value))
    unit = " ms" if METRICS.get(gate.metric, ((), None))[1] == "ms" and gate.stat != "count" else ""
    word = "ok" if ok else "FAILED"
    return GateResult(gate, ok, float(actual), f"{gate.describe()}: {word} (actual {actual:.4g}{unit})")


def _interval(r: Any) -> str:
    if r is None or r.ratio is None:
        return ""
    iv = f" [{r.low:.3f}, {r.high:.3f}]" if r.low is not None else ""
    return f"; run/baseline median ratio {r.ratio:.3f}{iv} at {r.confidence:.0%}: {r.verdict}"


def _evaluate_relative(gate: Gate, summary: dict[str, Any] | None, base: BaselineFigures) -> GateResult:
    actual = metric_value(summary or {}, gate)
    ref = metric_value(base.figures, gate)
    if actual is None or ref is None:
        missing = "the run" if actual is None else base.label()
        return GateResult(
            gate, False, actual, f"{gate.describe()}: no value ({missing} did not produce {gate.metric})"
        )
    limit = {"=": ref, "*": ref * gate.value, "+": ref + gate.value, "-": ref - gate.value}[
        gate.relative or "="
    ]
    ok = bool(_OPS[gate.op](float(actual), limit))
    unit = " ms" if METRICS[gate.metric][1] == "ms" and gate.stat != "count" else ""
    word = "ok" if ok else "FAILED"
    cmp_name = _COMPARE_NAME.get(gate.metric)
    r = base.comparison.result(cmp_name) if base.comparison is not None and cmp_name else None
    return GateResult(
        gate,
        ok,
        float(actual),
        f"{gate.describe()}: {word} (actual {actual:.4g}{unit}, limit {limit:.4g}{unit} from {base.label()} "
        f"{gate.stat or 'p95'} {ref:.4g}{unit}{_interval(r)})",
    )


def _evaluate_verdict(gate: Gate, base: BaselineFigures) -> GateResult:
    comp = base.comparison
    if comp is None:
        return GateResult(gate, False, None, f"{gate.describe()}: no comparison with {base.label()}")
    results = [r for r in comp.results if gate.metric == "*" or r.metric.name == gate.metric]
    if not results:
        return GateResult(gate, False, None, f"{gate.describe()}: nothing to compare with {base.label()}")
    judged = [r for r in results if r.verdict != "unknown"]
    if not judged:
        why = "; ".join(f"{r.metric.name}: {r.why}" for r in results)
        return GateResult(gate, False, None, f"{gate.describe()}: no verdict against {base.label()} ({why})")
    hits = [r for r in judged if r.verdict == gate.verdict]
    truth = 1.0 if hits else 0.0
    ok = bool(_OPS[gate.op](truth, gate.value))
    shown = hits or judged
    detail = "; ".join(
        f"{r.metric.name} {r.ratio:.3f} [{r.low:.3f}, {r.high:.3f}] {r.verdict}"
        for r in shown
        if r.ratio is not None
    )
    word = "ok" if ok else "FAILED"
    return GateResult(
        gate,
        ok,
        truth,
        f"{gate.describe()}: {word} (against {base.label()}, run/baseline median ratio at "
        f"{comp.confidence:.0%}: {detail})",
    )


# gate metric -> the comparison's metric of the same per-request values
_COMPARE_NAME = {
    "ttfa": "ttfa",
    "playback_start": "playback_start",
    "rtf_total": "rtf_total",
    "rtf_streamed": "rtf_streamed",
    "action_latency": "action_latency",
    "obs_age": "obs_age",
    "ttft": "ttft",
    "decode_tok_s": "decode_tok_s",
}
COMPARE_NAME = _COMPARE_NAME
