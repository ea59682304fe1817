"""Interleaved A/B passes and parameter sweeps: several configurations measured in alternating
blocks on one device under one lease, so drift on the device (a thermal ramp, a neighbour's load)
hits every configuration alike, stored as one linked run per configuration.

Each block is an ordinary ``run_bench`` (the runner is used as it is): the workload is started
afresh with its warm-up (default 1) and then ``block`` measured requests. Rounds go A B, then B A
(ABBA order) so neither configuration always runs first. After each block its evidence (requests,
raw samples, telemetry, logs) moves into the configuration's run (``edgelab.store.merge``), whose
summary is then recomputed from the raw rows like any run's. ``order="back-to-back"`` runs every
block of one configuration before the next: the control the self-check compares with.

A configuration is ``key=value`` settings over the base request: ``runtime``, ``strategy``,
``model`` (an artifact name), ``threads``, ``frames_per_s``, ``frames``, ``band``, ``control_hz``,
``slow_every``, ``slow_ms``, ``hog``; any other key is a launch template value (``-o``), e.g.
``schedule`` (alias ``chunk_schedule``: ``2+4+8+16+25``), ``ctx``, ``gpu_layers``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from edgelab.bench.runner import BenchRequest, BenchResult, run_bench
from edgelab.deploy import owner
from edgelab.deploy.options import Options
from edgelab.errors import BenchFailed, ConfigError, EdgelabError
from edgelab.metrics import compare as cmp
from edgelab.metrics.ingest import finalize
from edgelab.metrics.runsets import compare_sets, resolve, run_values
from edgelab.states import RunState
from edgelab.store.base import utcnow
from edgelab.store.db import session_scope
from edgelab.store.merge import move_run_rows
from edgelab.store.runs import create_run, get_run, put_summary, set_state

FIELDS: dict[str, Callable[[str], Any]] = {
    "runtime": str,
    "strategy": str,
    "model": str,
    "threads": int,
    "frames_per_s": float,
    "frames": int,
    "band": str,
    "control_hz": float,
    "slow_every": int,
    "slow_ms": float,
    "hog": int,
}
ALIASES = {"chunk_schedule": "schedule", "t": "threads"}
ORDERS = ("interleaved", "back-to-back")


@dataclass(frozen=True)
class Point:
    """One configuration: its label and settings (as given, strings)."""

    label: str
    config: dict[str, str]


def _key(k: str) -> str:
    k = k.strip().replace("-", "_")
    return ALIASES.get(k, k)


def _value(key: str, v: str) -> str:
    return v.strip().replace("+", ",") if key == "schedule" else v.strip()


def parse_settings(text: str) -> dict[str, str]:
    """``key=value[;key=value]``; a bare ``S3``..``S5`` is a strategy, any other bare word a model
    artifact (a second quantization) or, when it names a runtime, that runtime."""
    out: dict[str, str] = {}
    for part in [p for p in text.split(";") if p.strip()]:
        k, sep, v = part.partition("=")
        if not sep:
            word = part.strip()
            if len(word) == 2 and word[0] in "Ss" and word[1].isdigit():
                out["strategy"] = word.upper()
            else:
                from edgelab.runtimes import load_runtimes

                out["runtime" if word in load_runtimes() else "model"] = word
            continue
        if not k.strip() or not v.strip():
            raise ConfigError(
                f"{part!r} is not KEY=VALUE", remedy="e.g. --ab threads=1 or --ab model=tiny-q8_0"
            )
        out[_key(k)] = _value(_key(k), v)
    if not out:
        raise ConfigError(f"no setting in {text!r}", remedy="e.g. --ab threads=1")
    return out


def parse_sweep(specs: list[str]) -> list[Point]:
    """``key=v1,v2`` axes (a schedule's sizes joined by ``+``) -> their cross product, in order."""
    axes: list[tuple[str, list[str]]] = []
    for spec in specs:
        k, sep, vs = spec.partition("=")
        values = [v for v in vs.split(",") if v.strip()]
        if not sep or not k.strip() or not values:
            raise ConfigError(f"--sweep {spec!r} is not KEY=V1,V2,...", remedy="e.g. --sweep threads=1,2,4,8")
        key = _key(k)
        if key in [a[0] for a in axes]:
            raise ConfigError(
                f"--sweep names {key} twice", remedy="give each key once, its values comma-separated"
            )
        axes.append((key, [_value(key, v) for v in values]))
    points = []
    for combo in itertools.product(*[vs for _, vs in axes]):
        config = {k: v for (k, _), v in zip(axes, combo, strict=True)}
        points.append(Point(" ".join(f"{k}={v}" for k, v in config.items()), config))
    if len(points) < 2:
        raise ConfigError("a sweep needs at least two points", remedy="e.g. --sweep threads=1,2")
    return points


def configure(base: BenchRequest, config: dict[str, str]) -> BenchRequest:
    """The base request with a configuration's settings (template values merged over the base's)."""
    changes: dict[str, Any] = {}
    values = dict(base.values)
    for k, v in config.items():
        if k in FIELDS:
            try:
                changes[k] = FIELDS[k](v)
            except ValueError as err:
                raise ConfigError(f"{k}={v!r} is not a {FIELDS[k].__name__}", remedy=f"e.g. {k}=2") from err
        else:
            values[k] = v
    return dataclasses.replace(base, values=values, **changes)


@dataclass
class PointResult:
    point: Point
    run_id: str
    state: str = RunState.RUNNING
    blocks: list[str] = field(default_factory=list)  # block run ids, in the order they ran
    medians: dict[str, float | None] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.point.label,
            "config": self.point.config,
            "run": self.run_id,
            "state": self.state,
            "blocks": len(self.blocks),
            "medians": self.medians,
            "counts": self.counts,
            "error": self.error,
        }


@dataclass
class SweepResult:
    id: str
    kind: str  # ab | sweep
    order: str
    rounds: int
    block: int
    points: list[PointResult]
    best: dict[str, str] = field(default_factory=dict)  # metric -> the best point's label
    comparison: dict[str, Any] | None = None  # an A/B's runs compare
    virtual: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "sweep": self.id,
            "kind": self.kind,
            "order": self.order,
            "rounds": self.rounds,
            "block": self.block,
            "virtual": self.virtual,
            "points": [p.to_dict() for p in self.points],
            "best": self.best,
            "comparison": self.comparison,
        }


def schedule(n_points: int, rounds: int, order: str) -> list[tuple[int, int]]:
    """(round, point index) in the order they run: ABBA rounds, or back to back."""
    if order == "back-to-back":
        return [(r, i) for i in range(n_points) for r in range(rounds)]
    out = []
    for r in range(rounds):
        idx = list(range(n_points))
        out += [(r, i) for i in (idx if r % 2 == 0 else idx[::-1])]
    return out


def run_points(
    engine: Engine,
    base: BenchRequest,
    points: list[Point],
    *,
    kind: str = "sweep",
    block: int = 5,
    order: str = "interleaved",
    opts: Options | None = None,
    cancel: threading.Event | None = None,
    lease_id: str | None = None,
    on_block: Callable[[PointResult, BenchResult, int, int], None] | None = None,
    confidence: float = cmp.DEFAULT_CONFIDENCE,
    tags: list[str] | None = None,
) -> SweepResult:
    """Measure every point ``base.requests`` times in blocks of ``block`` under one lease; one
    stored run per point, linked through ``meta.sweep``. A failed block fails its point and stops
    the pass (the other points' runs end ``stopped`` with what they measured)."""
    from edgelab.deploy.reap import reap
    from edgelab.lease import held

    if order not in ORDERS:
        raise ConfigError(f"unknown order {order!r}", remedy=f"use one of {', '.join(ORDERS)}")
    if block < 1 or base.requests < 1:
        raise ConfigError("--block and --requests must be at least 1", remedy="e.g. --requests 20 --block 5")
    for p in points:
        configure(base, p.config)  # a bad setting is refused before anything runs
    rounds = math.ceil(base.requests / block)
    sweep_id = "s" + secrets.token_hex(5)
    reap(engine, base.device, opts=opts)
    cancel = cancel if cancel is not None else threading.Event()
    with held(
        engine,
        [base.device],
        f"bench {kind} {base.pipeline}",
        lease_id=lease_id,
        on_lost=lambda _w: cancel.set(),
    ) as use:
        lease = use.lease_for(base.device)
        results = _start_points(engine, base, points, sweep_id, kind, order, rounds, block, tags)
        done = dict.fromkeys(range(len(points)), 0)
        stopped = None
        try:
            for rnd, i in schedule(len(points), rounds, order):
                if cancel.is_set():
                    stopped = "cancelled by the caller (timeout or stop)"
                    break
                n = min(block, base.requests - done[i])
                req = dataclasses.replace(configure(base, points[i].config), requests=n)
                pr = results[i]
                try:
                    res = run_bench(engine, req, opts=opts, cancel=cancel, lease_id=lease)
                except BenchFailed as err:
                    _absorb(engine, pr, err.run_id, len(pr.blocks))
                    pr.error = f"block {len(pr.blocks)} ({err.run_id}) failed: {err}"
                    raise
                _absorb(engine, pr, res.run_id, len(pr.blocks))
                done[i] += n
                if res.state != RunState.FINISHED:
                    stopped = f"block {res.run_id} of {pr.point.label} ended {res.state}"
                    break
                if on_block is not None:
                    on_block(pr, res, rnd, rounds)
        except (EdgelabError, KeyboardInterrupt) as exc:
            # the point whose block failed ends failed (its error said); the others stopped, kept
            _close(engine, results, RunState.STOPPED, f"the pass stopped: {str(exc) or type(exc).__name__}")
            raise
        _close(
            engine,
            results,
            RunState.STOPPED if stopped else RunState.FINISHED,
            stopped and f"the pass stopped: {stopped}",
        )
    out = SweepResult(sweep_id, kind, order, rounds, block, results)
    with session_scope(engine, write=False) as s:
        out.virtual = bool(get_run(s, results[0].run_id).virtual)
        for pr in results:
            vals = run_values(s, get_run(s, pr.run_id))
            pr.medians = {k: cmp.side(v).median for k, v in vals.items()}
            pr.counts = {k: len(v) for k, v in vals.items()}
        out.best = best_points(results)
        if kind == "ab" and len(results) == 2:
            a = resolve(s, results[0].run_id)
            b = resolve(s, results[1].run_id)
            out.comparison = compare_sets(s, a, b, confidence=confidence).to_dict()
    return out


def best_points(results: list[PointResult]) -> dict[str, str]:
    """Per metric every point measured: the label of the point with the best median."""
    names = set.intersection(*(set(k for k, v in p.medians.items() if v is not None) for p in results))
    best = {}
    for name in sorted(names):
        try:
            m = cmp.metric(name)
        except KeyError:
            continue
        pick = (min if m.better == "lower" else max)(results, key=lambda p: p.medians[name])  # type: ignore[arg-type,return-value]
        best[name] = pick.point.label
    return best


def _start_points(
    engine: Engine,
    base: BenchRequest,
    points: list[Point],
    sweep_id: str,
    kind: str,
    order: str,
    rounds: int,
    block: int,
    tags: list[str] | None,
) -> list[PointResult]:
    """One running run per point, created before the first block so a crash leaves them on record."""
    out = []
    with session_scope(engine) as s:
        for p in points:
            req = configure(base, p.config)
            run = create_run(
                s,
                pipeline=base.pipeline,
                device_name=base.device,
                runtime=req.runtime,
                strategy=req.strategy,
                kind="bench",
                state=RunState.RUNNING,
                started_at=utcnow(),
                heartbeat_at=utcnow(),
                meta={
                    "sweep": {
                        "id": sweep_id,
                        "kind": kind,
                        "label": p.label,
                        "config": p.config,
                        "order": order,
                        "rounds": rounds,
                        "block": block,
                        "warmup_per_block": base.warmup,
                    },
                    "config": dict(p.config),
                    "tags": list(tags or []),
                },
                **owner.me(),
            )
            out.append(PointResult(p, run.id))
        linked = [{"label": pr.point.label, "run": pr.run_id} for pr in out]
        for pr in out:
            run = get_run(s, pr.run_id)
            run.meta = {**run.meta, "sweep": {**run.meta["sweep"], "points": linked}}
            s.add(run)
    return out


def _absorb(engine: Engine, pr: PointResult, block_run: str | None, index: int) -> None:
    """Move a finished (or failed) block's evidence into its point's run; keep what it ran."""
    if block_run is None:
        return
    with session_scope(engine) as s:
        blk = get_run(s, block_run)
        run = get_run(s, pr.run_id)
        meta, prov = dict(run.meta), dict(run.provenance)
        bmeta = dict(blk.meta)
        if not prov:  # the first block's provenance is the point's (every later block must match it)
            prov = dict(blk.provenance)
            run.runtime, run.strategy, run.virtual = blk.runtime, blk.strategy, blk.virtual
            run.profile, run.command = blk.profile, blk.command
            for key in (
                "protocol",
                "band",
                "batch",
                "concurrency",
                "weights",
                "threads",
                "template",
                "target",
                "options",
                "virtual_note",
                "execution",  # how a virtual device ran it: emulated figures stay labelled so
                "emulated",
                "control_hz",
                "control_period_s",
                "slow_every",
                "slow_ms",
                "parity",
                "cpu_hog",
            ):
                if key in bmeta:
                    meta[key] = bmeta[key]
        else:
            drift = {
                k: blk.provenance.get(k)
                for k in ("runtime_sha256", "artifacts", "threads", "weights")
                if blk.provenance.get(k) != prov.get(k)
            }
            if drift:
                meta.setdefault("provenance_drift", []).append({"block": index, "run": block_run, **drift})
        prefix = f"b{index}."
        meta["requests"] = meta.get("requests", 0) + int(bmeta.get("requests") or 0)
        meta["warmup"] = meta.get("warmup", 0) + int(bmeta.get("warmup") or 0)
        meta.setdefault("blocks", []).append(
            {"block": index, "run": block_run, "state": blk.state, "command": blk.command, "error": blk.error}
        )
        if bmeta.get("records"):  # llama-server: the per-request records its report is made of
            meta.setdefault("records", []).extend(
                {**r, "request": prefix + str(r.get("request"))} for r in bmeta["records"]
            )
        if bmeta.get("llama_bench") is not None:  # llama-bench: repetitions pooled per test
            meta["llama_bench"] = _pool_llama_bench(meta.get("llama_bench") or [], bmeta["llama_bench"])
        for key in ("placement", "llama", "server_metrics", "controller", "admission", "clock"):
            if key in bmeta:
                meta.setdefault("block_" + key, []).append(bmeta[key])
        run.meta, run.provenance = meta, prov
        run.heartbeat_at = utcnow()
        s.add(run)
        s.flush()
        move_run_rows(s, block_run, pr.run_id, prefix)
    pr.blocks.append(block_run)


def _pool_llama_bench(have: list[dict[str, Any]], more: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by = {r["test"]: dict(r) for r in have}
    for r in more:
        cur = by.setdefault(r["test"], {**r, "samples_ts": [], "samples_ns": []})
        if cur is not r:
            cur["samples_ts"] = list(cur.get("samples_ts") or []) + list(r.get("samples_ts") or [])
            cur["samples_ns"] = list(cur.get("samples_ns") or []) + list(r.get("samples_ns") or [])
        ts = cur["samples_ts"]
        if ts:
            mean = sum(ts) / len(ts)
            cur["avg_ts"] = mean
            cur["stddev_ts"] = (sum((x - mean) ** 2 for x in ts) / max(1, len(ts) - 1)) ** 0.5
    return list(by.values())


def _close(engine: Engine, results: list[PointResult], state: str, why: str | None) -> None:
    """Every point's summary recomputed from its (moved) raw rows; the run ends ``state``."""
    for pr in results:
        meta_llama = None
        with session_scope(engine, write=False) as s:
            run = get_run(s, pr.run_id)
            if run.meta.get("records"):
                from edgelab.deploy import llama_drive

                peaks = [b.get("peak_rss_bytes") for b in run.meta.get("block_llama") or [] if b]
                meta_llama = llama_drive.report(
                    llama_drive.DriveResult(
                        records=list(run.meta["records"]),
                        peak_rss_bytes=max([p for p in peaks if p] or [0]) or None,
                    )
                )
        final = finalize(engine, pr.run_id)
        end = state if pr.error is None else RunState.FAILED
        with session_scope(engine) as s:
            run = get_run(s, pr.run_id)
            if meta_llama is not None:
                run.meta = {**run.meta, "llama": meta_llama}
                s.add(run)
            put_summary(s, pr.run_id, "live", final, run.provenance)
            put_summary(s, pr.run_id, "final", final, run.provenance)
            err = pr.error or (why if end != RunState.FINISHED else None)
            set_state(s, run, end, error=err)
        pr.state = end


HEADLINE_BY_KIND = {"tts": "ttfa", "text_lm": "decode_tok_s", "vla": "action_latency"}


def best_from_sweep(session, ref: str, *, metric: str | None = None) -> dict[str, Any]:
    """The best point of the sweep a run belongs to, by ``metric`` (default: the pipeline's headline
    that every point measured): its settings, run and median, beside every point's median."""
    from edgelab.catalog.pipelines import load_pipelines
    from edgelab.deploy import planning

    run = get_run(session, ref)
    sw = (run.meta or {}).get("sweep")
    if not sw or not sw.get("points"):
        raise ConfigError(
            f"run {run.id} is not part of a sweep", remedy="pass a run stored by bench --sweep or --ab"
        )
    points = []
    for p in sw["points"]:
        r = get_run(session, p["run"])
        if r.state != RunState.FINISHED:
            raise ConfigError(
                f"point {p['label']} ({r.id}) is {r.state}", remedy="take a sweep that finished"
            )
        vals = run_values(session, r)
        points.append({"label": p["label"], "run": r.id, "config": (r.meta.get("sweep") or {}).get("config", {}),
                       "medians": {k: cmp.side(v).median for k, v in vals.items()}})  # fmt: skip
    shared = set.intersection(*(set(p["medians"]) for p in points))
    if metric is None:
        kind = load_pipelines()[planning.resolve_pipeline(str(run.pipeline))].kind
        metric = HEADLINE_BY_KIND.get(kind)
        if metric not in shared:
            metric = next((n for n in cmp.METRICS if n in shared), None)
    if metric is None or metric not in shared:
        raise ConfigError(
            f"sweep {sw['id']}: not every point measured {metric or 'a comparable metric'}",
            remedy=f"pass --metric one of {', '.join(sorted(shared)) or '(none)'}",
        )
    m = cmp.metric(metric)
    best = (min if m.better == "lower" else max)(points, key=lambda p: p["medians"][metric])
    return {
        "sweep": sw["id"],
        "device": run.device_name,
        "pipeline": run.pipeline,
        "metric": metric,
        "better": m.better,
        "best": best,
        "points": points,
        "virtual": bool(run.virtual),
    }
