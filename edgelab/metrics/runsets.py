"""Sets of stored runs, their raw per-request values, and whether two sets may be compared.

A side of a comparison is a run, several runs (``r1,r2``), a named baseline (``baseline:NAME``),
the runs carrying a tag (``tag:NAME``, from ``bench --tag``) or the newest N finished runs of one
device and pipeline (``last:N``). Its values are pooled from the stored rows of the measured
requests (never the summaries): per request TTFA, playback start, RTF, wall time, TTFT, request
p50 inter-token gap and decode rate; per action chunk latency and age; per llama-bench
repetition its tokens/s. Two sets compare only when device, pipeline, protocol (with band) and
the virtual flag agree; every provenance field that differs is listed either way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, col, select

from edgelab.errors import ConfigError, NotFound
from edgelab.metrics import compare as cmp
from edgelab.states import RunState
from edgelab.store.baselines import Baseline, find_baseline
from edgelab.store.runs import FINAL_STATES, Run, RunSample, get_run, requests_of

# provenance fields shown when they differ (the run's own command differs by its run paths: left out)
PROVENANCE_FIELDS = (
    "runtime",
    "strategy",
    "runtime_build",
    "runtime_sha256",
    "artifacts",
    "model",
    "weights",
    "threads",
    "profile",
    "cache",
    "power",
    "facts_hash",
    "target",
    "edgelab_version",
    "git",
)
META_FIELDS = ("template", "frames_per_s", "frames", "control_hz", "options", "config")


@dataclass
class RunSet:
    """One side: its runs (newest first) and how it was named."""

    ref: str
    runs: list[Run]
    label: str
    baseline: Baseline | None = None
    values: dict[str, list[float]] = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.runs]

    def key(self) -> dict[str, Any]:
        """What must agree with the other side: device, pipeline, protocol and band, virtual."""
        return {
            "device": _one(r.device_name for r in self.runs),
            "pipeline": _one(r.pipeline for r in self.runs),
            "protocol": _one(protocol(r) for r in self.runs),
            "virtual": _one(bool(r.virtual) for r in self.runs),
        }

    def describe(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "label": self.label,
            "runs": self.ids,
            "baseline": self.baseline.to_dict() if self.baseline else None,
            **self.key(),
        }


_MIXED = "(mixed)"


def _one(values) -> Any:
    seen = list(dict.fromkeys(values))
    return seen[0] if len(seen) == 1 else _MIXED if seen else None


def protocol(run: Run) -> str:
    """The run's measured-run protocol and band (``single_request_batch1_v1/short``)."""
    meta = run.meta or {}
    report = meta.get("report") if isinstance(meta.get("report"), dict) else {}
    proto = meta.get("protocol") or report.get("protocol") or "unknown"
    band = meta.get("band")
    return f"{proto}/{band}" if band else str(proto)


# ------------------------------------------------------------------------ resolving a side


def resolve(
    session: Session,
    ref: str,
    *,
    like: RunSet | None = None,
    device: str | None = None,
    pipeline: str | None = None,
    exclude: list[str] | None = None,
) -> RunSet:
    """A side from its name. ``like`` (the other side, resolved first) narrows a baseline with
    several keys and a ``last:N`` to its device and pipeline; ``device``/``pipeline`` do the same."""
    ref = ref.strip()
    ctx = like.key() if like is not None else {}
    dev = device or (ctx.get("device") if ctx.get("device") != _MIXED else None)
    pipe = pipeline or (ctx.get("pipeline") if ctx.get("pipeline") != _MIXED else None)
    if ref.startswith(("baseline:", "@")):
        name = ref.split(":", 1)[1] if ref.startswith("baseline:") else ref[1:]
        strat = rt = None
        if like is not None and like.runs:
            strat = _one(r.strategy for r in like.runs)
            rt = _one(r.runtime for r in like.runs)
        base = _find_base(session, name, dev, pipe, strat, rt)
        runs = _existing(session, base.runs, f"baseline {name!r}")
        who = f"baseline {name} ({len(runs)} run{'s' if len(runs) != 1 else ''}, set by {base.set_by} at {base.set_at:%Y-%m-%d %H:%M})"
        return RunSet(ref, runs, who, baseline=base)
    if ref.startswith("tag:"):
        tag = ref[4:]
        runs = [
            r
            for r in _finished(session, dev, pipe)
            if tag in ((r.meta or {}).get("tags") or []) and r.id not in (exclude or [])
        ]
        if not runs:
            raise NotFound(
                f"no finished run carries tag {tag!r}", remedy="tag runs with: edgelab bench ... --tag NAME"
            )
        return RunSet(ref, runs, f"tag {tag} ({len(runs)} runs)")
    if m := re.fullmatch(r"last:(\d+)", ref):
        n = int(m[1])
        if n < 1:
            raise ConfigError("last:N needs N >= 1", remedy="e.g. last:5")
        if dev is None or pipe is None:
            raise ConfigError(
                f"{ref} needs a device and a pipeline",
                remedy="pass --device and --pipeline, or compare with a run",
            )
        runs = [r for r in _finished(session, dev, pipe) if r.id not in (exclude or [])]
        if like is not None:  # the same protocol, strategy and runtime as the other side
            runs = [r for r in runs if protocol(r) == ctx.get("protocol")]
        runs = runs[:n]
        if not runs:
            raise NotFound(f"no earlier finished run of {pipe} on {dev}", remedy="run edgelab bench first")
        return RunSet(ref, runs, f"last {len(runs)} of {pipe} on {dev}")
    runs = [get_run(session, part) for part in ref.split(",") if part.strip()]
    if not runs:
        raise ConfigError(
            f"nothing to compare in {ref!r}", remedy="give run ids, baseline:NAME, tag:NAME or last:N"
        )
    label = runs[0].id if len(runs) == 1 else f"{len(runs)} runs"
    return RunSet(ref, runs, label)


def _find_base(session: Session, name: str, dev, pipe, strat, rt) -> Baseline:
    """The narrowest match first: with strategy and runtime, then without them."""
    try:
        return find_baseline(session, name, device=dev, pipeline=pipe, strategy=strat, runtime=rt)
    except (NotFound, ConfigError):
        if strat is None and rt is None:
            raise
    return find_baseline(session, name, device=dev, pipeline=pipe)


def _existing(session: Session, ids: list[str], what: str) -> list[Run]:
    found = {r.id: r for r in session.exec(select(Run).where(col(Run.id).in_(ids))).all()}
    missing = [i for i in ids if i not in found]
    if missing:
        raise NotFound(
            f"{what} names run(s) no longer stored: {', '.join(missing)}",
            remedy="set the baseline again on stored runs (edgelab runs baseline set)",
        )
    return [found[i] for i in ids]


def _finished(session: Session, device: str | None, pipeline: str | None) -> list[Run]:
    q = (
        select(Run)
        .where(col(Run.state) == RunState.FINISHED)
        .order_by(col(Run.created_at).desc(), col(Run.id))
    )
    if device:
        q = q.where(Run.device_name == device)
    if pipeline:
        q = q.where(Run.pipeline == pipeline)
    return list(session.exec(q.limit(500)).all())


# ------------------------------------------------------------------------ raw values


def run_values(session: Session, run: Run) -> dict[str, list[float]]:
    """The run's raw per-request (per chunk, per repetition) values by metric name."""
    out: dict[str, list[float]] = {}

    def put(name: str, value: Any) -> None:
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.setdefault(name, []).append(float(value))

    reqs = requests_of(session, run.id)
    head = [r for r in reqs if r.phase == "measured"] or [r for r in reqs if r.phase != "warmup"]
    warm = {r.request for r in reqs if r.phase == "warmup"}
    for r in head:
        if r.ok is False:
            continue
        m = r.metrics or {}
        a = m.get("audio") or {}
        if a.get("chunks"):
            put("ttfa", a.get("ttfa_ms"))
            put("playback_start", a.get("playback_start_ms"))
            put("rtf_streamed", a.get("rtf_streamed"))
            put("rtf_total", a.get("rtf_total"))
        t = m.get("text") or {}
        if t.get("tokens"):
            put("ttft", t.get("ttft_ms"))
            put("itl", (t.get("itl_ms") or {}).get("p50"))
            put("decode_tok_s", t.get("decode_tok_s"))
        c = m.get("codec") or {}
        put("codec_first_frame", c.get("first_frame_ms"))
        if r.finished is not None and (a.get("chunks") or t.get("tokens")):
            put("request_wall", (r.finished - r.submitted) * 1000.0)
    actions = session.exec(
        select(RunSample.request, RunSample.t, RunSample.obs_t, RunSample.infer_start, RunSample.infer_end)
        .where(RunSample.run_id == run.id, RunSample.kind == "action")
        .order_by(col(RunSample.id))
    ).all()
    for request, t_, obs_t, start, end in actions:
        if request in warm:
            continue
        if start is not None and end is not None:
            put("action_latency", (end - start) * 1000.0)
        if obs_t is not None:
            put("obs_age", (t_ - obs_t) * 1000.0)
    for rec in (run.meta or {}).get("llama_bench") or []:  # llama-bench: one value per repetition
        name = "tok_s_" + re.sub(r"[^a-z0-9]+", "_", str(rec.get("test", "")).lower()).strip("_")
        for v in rec.get("samples_ts") or []:
            put(name, v)
    return out


def pooled_values(session: Session, runs: list[Run]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in runs:
        for k, vs in run_values(session, r).items():
            out.setdefault(k, []).extend(vs)
    return out


# ------------------------------------------------------------------------ comparable?


def refusals(a: RunSet, b: RunSet) -> list[str]:
    """Why these two sets must not be compared (empty: they may)."""
    why = []
    for side, rs in (("A", a), ("B", b)):
        for r in rs.runs:
            if r.state not in FINAL_STATES:
                why.append(f"run {r.id} ({side}) is still {r.state}")
        for k, v in rs.key().items():
            if v == _MIXED:
                why.append(f"side {side} mixes runs of different {k}")
    ka, kb = a.key(), b.key()
    for k in ("device", "pipeline", "protocol"):
        if ka[k] != _MIXED and kb[k] != _MIXED and ka[k] != kb[k]:
            why.append(f"different {k}: {ka[k]} vs {kb[k]}")
    if ka["virtual"] != _MIXED and kb["virtual"] != _MIXED and ka["virtual"] != kb["virtual"]:
        why.append("a virtual device's runs against a real device's")
    if set(a.ids) & set(b.ids):
        why.append(f"both sides hold run(s) {', '.join(sorted(set(a.ids) & set(b.ids)))}")
    return why


def _field(run: Run, name: str) -> Any:
    prov, meta = run.provenance or {}, run.meta or {}
    if name in META_FIELDS:
        return meta.get(name)
    if name == "git":
        g = prov.get("git")
        return g.get("commit") if isinstance(g, dict) else g
    if name == "model":
        mdl = prov.get("model")
        return mdl.get("sha256") if isinstance(mdl, dict) else mdl
    if name == "threads":
        return prov.get("threads", meta.get("threads"))
    if name == "target":
        return meta.get("target")
    return prov.get(name)


def provenance_diff(a: RunSet, b: RunSet) -> list[dict[str, Any]]:
    """Every provenance (and configuration) field whose values differ between or within the sides."""
    out = []
    for name in (*PROVENANCE_FIELDS, *META_FIELDS):
        va = list(dict.fromkeys(_text(_field(r, name)) for r in a.runs))
        vb = list(dict.fromkeys(_text(_field(r, name)) for r in b.runs))
        if va != vb or len(va) > 1:
            out.append({"field": name, "a": va, "b": vb})
    return out


def _text(v: Any) -> str:
    if isinstance(v, dict) and not v:
        return "-"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_text(x)}" for k, x in sorted(v.items()))
    return "-" if v is None else str(v)


# ------------------------------------------------------------------------ the comparison


@dataclass
class Comparison:
    a: RunSet
    b: RunSet
    results: list[cmp.Result]
    refused: list[str]
    allowed: bool
    differs: list[dict[str, Any]]
    confidence: float
    seed: int
    resamples: int

    def result(self, metric: str) -> cmp.Result | None:
        return next((r for r in self.results if r.metric.name == metric), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a.describe(),
            "b": self.b.describe(),
            "comparable": not self.refused,
            "refused": self.refused,
            "allowed": self.allowed,
            "confidence": self.confidence,
            "method": {
                "estimate": "median(B) / median(A) of the raw per-request values",
                "interval": "percentile bootstrap, both sides resampled",
                "resamples": self.resamples,
                "seed": self.seed,
            },
            "provenance_differs": self.differs,
            "metrics": [r.to_dict() for r in self.results],
        }


def compare_sets(
    session: Session,
    a: RunSet,
    b: RunSet,
    *,
    allow: bool = False,
    confidence: float = cmp.DEFAULT_CONFIDENCE,
    seed: int = cmp.DEFAULT_SEED,
    resamples: int = cmp.DEFAULT_RESAMPLES,
    threshold: float = 0.0,
    only: list[str] | None = None,
) -> Comparison:
    """Compare two resolved sides. Not comparable and not ``allow``: ConfigError naming every reason."""
    why = refusals(a, b)
    if why and not allow:
        raise ConfigError(
            f"not comparable: {'; '.join(why)}",
            remedy="compare runs of one device, pipeline and protocol, or pass --allow to compare anyway",
        )
    a.values = pooled_values(session, a.runs)
    b.values = pooled_values(session, b.runs)
    results = cmp.compare_samples(
        a.values,
        b.values,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        threshold=threshold,
        only=only,
    )
    return Comparison(a, b, results, why, allow, provenance_diff(a, b), confidence, seed, resamples)


def compare_refs(
    session: Session,
    a_ref: str | None,
    b_ref: str,
    *,
    last: int | None = None,
    device: str | None = None,
    pipeline: str | None = None,
    **kwargs: Any,
) -> Comparison:
    """``A B`` by name; with ``last`` and no A, A is the newest ``last`` finished runs of B's device,
    pipeline and protocol before B (a nightly's "is tonight different from the last N nights")."""
    b = resolve(session, b_ref, device=device, pipeline=pipeline)
    if a_ref is None:
        if not last:
            raise ConfigError("compare needs two sides", remedy="edgelab runs compare A B (or B --last N)")
        newest = min(r.created_at for r in b.runs)
        a = resolve(session, f"last:{last + len(b.runs) + 5}", like=b, exclude=b.ids)
        a.runs = [r for r in a.runs if r.created_at < newest][:last]
        if not a.runs:
            raise NotFound(
                f"no finished run before {b.label} to compare with", remedy="run edgelab bench first"
            )
        a.label = f"last {len(a.runs)} before {b.label}"
        a.ref = f"last:{last}"
    else:
        a = resolve(session, a_ref, like=b, device=device, pipeline=pipeline, exclude=b.ids)
    return compare_sets(session, a, b, **kwargs)


def tag_runs(session: Session, ids: list[str], tags: list[str]) -> None:
    """Add ``tags`` to the runs' ``meta.tags`` (what ``tag:NAME`` finds)."""
    for rid in ids:
        run = get_run(session, rid)
        meta = dict(run.meta or {})
        meta["tags"] = list(dict.fromkeys([*(meta.get("tags") or []), *tags]))
        run.meta = meta
        session.add(run)
    session.flush()


def trend(
    session: Session, device: str, pipeline: str, metric: str, *, last: int = 20
) -> list[dict[str, Any]]:
    """The newest ``last`` finished runs' median of ``metric``, oldest first (a cell's nights)."""
    out = []
    for r in reversed(_finished(session, device, pipeline)[: last * 3]):
        vals = run_values(session, r).get(metric)
        if vals:
            s = cmp.side(vals)
            out.append({"run": r.id, "at": r.created_at, "median": s.median, "p95": s.p95, "count": s.count})
    return out[-last:]


__all__ = [
    "Comparison",
    "RunSet",
    "compare_refs",
    "compare_sets",
    "pooled_values",
    "provenance_diff",
    "refusals",
    "resolve",
    "run_values",
    "tag_runs",
    "trend",
]
