"""Events -> live aggregates -> the store, with batched writes.

One ``Ingestor`` per run. Raw samples are buffered and written in one transaction per
batch (or every ``flush_s``), so a watcher in another process sees them within about
``flush_s``; the live summary row is refreshed at most every ``live_every_s``. ``close``
writes the final summary recomputed from the stored raw samples (not from memory), and
records whether it equals the live figures.
"""

from __future__ import annotations

import collections
import time
from collections import namedtuple
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Engine, bindparam, insert, select, update
from sqlmodel import select as sm_select

from edgelab.metrics import events as ev
from edgelab.metrics.live import RunAggregator, recompute, request_metrics
from edgelab.metrics.provenance import observed
from edgelab.states import RunState
from edgelab.store.db import session_scope
from edgelab.store.models import utcnow
from edgelab.store.runs import (
    FINAL_STATES,
    Run,
    RunLog,
    RunRequest,
    RunSample,
    RunSummary,
    TelemetrySample,
    get_run,
    get_summary,
    put_summary,
    requests_of,
    set_state,
)

_SAMPLE = RunSample.__table__
_REQ = RunRequest.__table__
_TEL = TelemetrySample.__table__
_LOG = RunLog.__table__
_RUN = Run.__table__
_SUM = RunSummary.__table__
_REQ_END = (
    update(_REQ)
    .where(_REQ.c.run_id == bindparam("rid"), _REQ.c.request == bindparam("rq"))
    .values(finished=bindparam("fin"), ok=bindparam("ok"), error=bindparam("err"), metrics=bindparam("m"))
)


def telemetry_row(e: ev.ResourceSample, run_id: str | None) -> dict[str, Any]:
    """One ``telemetry_sample`` row from a ResourceSample event (unknown fields kept in ``raw``)."""
    return {
        "run_id": run_id,
        "device_name": e.device,
        "t": e.t,
        "source": e.source,
        "cpu_pct": e.cpu_pct,
        "rss_bytes": e.rss_bytes,
        "mem_available_bytes": e.mem_available_bytes,
        "gpu_util_pct": e.gpu_util_pct,
        "throttled": e.throttled,
        "temps_c": e.temps_c,
        "clocks_mhz": e.clocks_mhz,
        "power_w": e.power_w,
        "virtual": e.virtual,
        "raw": e.raw or None,
    }


class Ingestor:
    """Feed events of one run; call ``close()`` (or use ``with``) to finish it.

    ``lease``: a holder's record (the follower's) kept in ``run.meta["follower"]`` over ``base_meta``
    and stamped with a heartbeat and the byte ``offset`` read so far at every flush, in the flush's
    own transaction: whoever holds the run proves it alive by storing what it read.
    """

    def __init__(
        self,
        engine: Engine,
        run_id: str,
        *,
        batch: int = 5000,
        flush_s: float = 0.02,
        live_every_s: float = 0.1,
        period_s: float | None = None,
        lease: dict[str, Any] | None = None,
        base_meta: dict[str, Any] | None = None,
    ):
        self.engine = engine
        self.lease = lease
        self.base_meta: dict[str, Any] = base_meta if base_meta is not None else {}
        self.offset = int((lease or {}).get("offset", 0))
        self.run_id = run_id
        self.batch = batch
        self.flush_s = flush_s
        self.live_every_s = live_every_s
        with session_scope(engine, write=False) as s:
            run = get_run(s, run_id)
            meta = dict(run.meta)
            self._provenance = dict(run.provenance or {})
        if period_s is None and meta.get("control_period_s"):
            period_s = float(meta["control_period_s"])
        self.agg = RunAggregator(period_s=period_s)
        self._samples: list[dict[str, Any]] = []
        self._new_reqs: list[dict[str, Any]] = []
        self._ended: list[ev.RequestEnd] = []
        self._tel: list[dict[str, Any]] = []
        self._logs: list[dict[str, Any]] = []
        self._run_update: dict[str, Any] = {}
        self._pending = 0
        self._last_flush = time.monotonic()
        self._last_live = 0.0
        self._live_gap = live_every_s
        self._offered: collections.deque[ev.Event] = collections.deque()
        self._draining = False
        self.closed = False

    # --- feeding ------------------------------------------------------------------------------
    def offer(self, e: ev.Event) -> None:
        """From another thread (a telemetry sampler beside the run): queued, fed by the ingesting
        thread at its next feed or flush, so one thread writes and the live summary sees it."""
        self._offered.append(e)

    def _drain_offered(self) -> None:
        """Buffer what other threads offered; never a flush from here: a caller (a follower) may have
        counted the event it feeds next as stored already, and a flush now would record that count
        without the event (lost, if the process died before the next flush)."""
        if self._draining:
            return
        self._draining = True
        try:
            while self._offered:
                self._feed(self._offered.popleft(), may_flush=False)
        finally:
            self._draining = False

    def feed(self, e: ev.Event) -> None:
        self._drain_offered()
        self._feed(e)

    def _feed(self, e: ev.Event, *, may_flush: bool = True) -> None:
        rid = self.run_id
        req = getattr(e, "request", None)
        if req and req not in self.agg.requests and type(e) is not ev.RequestStart:
            self._new_reqs.append(
                {
                    "run_id": rid,
                    "request": req,
                    "phase": "measured",
                    "band": None,
                    "submitted": e.t,
                    "finished": None,
                    "ok": None,
                    "error": None,
                    "metrics": None,
                }
            )
        self.agg.feed(e)
        k = type(e)
        if k is ev.AudioChunk:
            r = self.agg.requests[req]
            self._samples.append(
                (
                    rid,
                    req,
                    "audio",
                    e.idx,
                    e.t,
                    (e.t - r.submitted) * 1000.0,
                    e.samples,
                    e.sample_rate,
                    e.sha256,
                    e.terminal,
                    None,
                    None,
                    None,
                    None,
                    None,
                )
            )
        elif k is ev.ActionChunk:
            self._samples.append(
                (
                    rid,
                    req or None,
                    "action",
                    e.idx,
                    e.t,
                    None,
                    None,
                    None,
                    None,
                    None,
                    e.obs_t,
                    e.infer_start,
                    e.infer_end,
                    e.horizon,
                    e.dims,
                )
            )
        elif k is ev.TextToken:
            r = self.agg.requests[req]
            self._samples.append(
                (
                    rid,
                    req,
                    "text",
                    None,
                    e.t,
                    (e.t - r.submitted) * 1000.0,
                    e.n,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                )
            )
        elif k is ev.CodecFrames:
            r = self.agg.requests[req]
            self._samples.append(
                (
                    rid,
                    req,
                    "codec",
                    e.seq,
                    e.t,
                    (e.t - r.submitted) * 1000.0,
                    e.n_frames,
                    None,
                    None,
                    bool(e.flags & 0x1),
                    None,
                    None,
                    None,
                    None,
                    None,
                )
            )
        elif k is ev.RequestStart:
            self._new_reqs.append(
                {
                    "run_id": rid,
                    "request": e.request,
                    "phase": e.phase,
                    "band": e.band,
                    "submitted": e.t,
                    "finished": None,
                    "ok": None,
                    "error": None,
                    "metrics": None,
                }
            )
        elif k is ev.RequestEnd:
            self._ended.append(e)
        elif k is ev.ResourceSample:
            self._tel.append(telemetry_row(e, rid))
        elif k is ev.LogLine:
            self._logs.append(
                {
                    "run_id": rid,
                    "t": e.t,
                    "kind": "log",
                    "level": e.level,
                    "request": None,
                    "message": e.line,
                    "data": {"stream": e.stream},
                }
            )
        elif k is ev.ErrorEvent:
            self._logs.append(
                {
                    "run_id": rid,
                    "t": e.t,
                    "kind": "error",
                    "level": e.cls,
                    "request": e.request,
                    "message": e.message,
                    "data": None,
                }
            )
        elif k is ev.StageTiming:
            self._logs.append(
                {
                    "run_id": rid,
                    "t": e.t,
                    "kind": "stage",
                    "level": None,
                    "request": e.request,
                    "message": e.stage,
                    "data": {"start": e.start, "end": e.end},
                }
            )
        elif k is ev.RunStart:
            self._run_update.update(state=RunState.RUNNING, started_at=utcnow())
            seen = observed(self._provenance, e.meta or {})
            if (
                seen != self._provenance
            ):  # where the runtime says it ran, what it loaded: provenance, not a claim
                self._provenance = seen
                self._run_update["provenance"] = dict(self._provenance)
        elif k is ev.RunEnd:
            self._run_update.update(state=e.state, finished_at=utcnow(), error=e.error)
        self._pending += 1
        if may_flush and (self._pending >= self.batch or time.monotonic() - self._last_flush >= self.flush_s):
            self.flush()

    def feed_all(self, events: Iterable[ev.Event]) -> None:
        for e in events:
            self.feed(e)

    # --- writing ------------------------------------------------------------------------------
    def lease_done(self) -> None:
        """The holder is done with the run (the next flush stores ``done``: no one takes it over)."""
        if self.lease is not None:
            self.lease["done"] = True

    def flush(self, *, live: bool | None = None) -> None:
        if self.lease is not None:
            self.lease.update(heartbeat=time.time(), offset=self.offset)
            self._run_update["meta"] = {**self.base_meta, "follower": dict(self.lease)}
        self._drain_offered()
        now = time.monotonic()
        write_live = live if live is not None else now - self._last_live >= self._live_gap
        with self.engine.begin() as conn:
            if self._new_reqs:
                conn.execute(insert(_REQ), self._new_reqs)
            if self._samples:
                conn.exec_driver_sql(_sample_sql(conn.dialect.paramstyle), self._samples)
            if self._tel:
                conn.execute(insert(_TEL), self._tel)
            if self._logs:
                conn.execute(insert(_LOG), self._logs)
            if self._ended:
                conn.execute(
                    _REQ_END,
                    [
                        {
                            "rid": self.run_id,
                            "rq": e.request,
                            "fin": e.t,
                            "ok": e.ok,
                            "err": e.error,
                            "m": request_metrics(self.agg.request_view(e.request)),
                        }
                        for e in self._ended
                    ],
                )
            upd = dict(self._run_update, heartbeat_at=utcnow())
            if upd.get("state") == RunState.RUNNING:  # a late run.start never reopens a run stopped meanwhile
                start = {k: upd.pop(k) for k in ("state", "started_at") if k in upd}
                conn.execute(
                    update(_RUN)
                    .where(_RUN.c.id == self.run_id, _RUN.c.state.notin_(FINAL_STATES))
                    .values(**start)
                )
            conn.execute(update(_RUN).where(_RUN.c.id == self.run_id).values(**upd))
            if write_live:  # same transaction: one write lock per flush
                t_sum = time.perf_counter()
                values = {"metrics": self.agg.summary(), "computed_at": utcnow()}
                # a big run's summary costs more: keep it under ~10 % of the ingest time
                self._live_gap = max(self.live_every_s, 10 * (time.perf_counter() - t_sum))
                res = conn.execute(
                    update(_SUM).where(_SUM.c.run_id == self.run_id, _SUM.c.kind == "live").values(**values)
                )
                if res.rowcount == 0:
                    conn.execute(
                        insert(_SUM).values(run_id=self.run_id, kind="live", provenance={}, **values)
                    )
        self._new_reqs, self._samples, self._tel, self._logs, self._ended = [], [], [], [], []
        self._run_update = {}
        self._pending = 0
        self._last_flush = time.monotonic()
        if write_live:
            self._last_live = self._last_flush

    def close(self, state: str | None = None, error: str | None = None) -> dict[str, Any]:
        """Flush, write the live and final summaries, and end the run; returns the final summary."""
        if self.closed:
            raise RuntimeError("ingestor already closed")
        self.flush(live=True)
        live = self.agg.summary()
        final = finalize(self.engine, self.run_id, period_s=self.agg.period_s)
        final["live_equals_final"] = _strip(final) == _strip(live)
        with session_scope(self.engine) as s:
            run = get_run(s, self.run_id)
            put_summary(s, self.run_id, "final", final, run.provenance)
            end = state or (self.agg.state if self.agg.state in FINAL_STATES else RunState.FINISHED)
            if run.state not in FINAL_STATES or state:
                set_state(s, run, end, error=error)
        self.closed = True
        return final

    def __enter__(self) -> Ingestor:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self.closed:
            self.close(state=RunState.FAILED if exc is not None else None, error=str(exc) if exc else None)


SAMPLE_COLS = (
    "run_id",
    "request",
    "kind",
    "idx",
    "t",
    "t_ms",
    "n",
    "sample_rate",
    "sha256",
    "terminal",
    "obs_t",
    "infer_start",
    "infer_end",
    "horizon",
    "dims",
)
# Raw samples go straight to the DB-API executemany (tuples, no per-row SQLAlchemy work): the hot path.
SampleRow = namedtuple("SampleRow", SAMPLE_COLS)  # plain tuples: cheaper than ORM objects for 10^5 rows


def _sample_sql(paramstyle: str) -> str:
    mark = "?" if paramstyle == "qmark" else "%s"
    return (
        f"INSERT INTO run_sample ({', '.join(SAMPLE_COLS)}) VALUES ({', '.join([mark] * len(SAMPLE_COLS))})"
    )


def _strip(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k != "live_equals_final"}


def finalize(
    engine: Engine, run_id: str, *, period_s: float | None = None, errors: dict[str, int] | None = None
) -> dict[str, Any]:
    """The run's summary recomputed from what is stored: requests, raw samples, error and stage
    lines, telemetry. ``errors`` is accepted for older callers and ignored: the stored error lines count."""
    del errors
    with session_scope(engine, write=False) as s:
        run = get_run(s, run_id)
        if period_s is None and run.meta.get("control_period_s"):
            period_s = float(run.meta["control_period_s"])
        reqs = requests_of(s, run_id)
        conn = s.connection()
        rows = conn.execute(
            select(*[_SAMPLE.c[c] for c in SAMPLE_COLS])
            .where(_SAMPLE.c.run_id == run_id)
            .order_by(_SAMPLE.c.id)
        ).all()
        samples = [SampleRow._make(r) for r in rows]
        stored_errors: dict[str, int] = {}
        stages = []
        for kind, level, message, data in conn.execute(
            select(_LOG.c.kind, _LOG.c.level, _LOG.c.message, _LOG.c.data)
            .where(_LOG.c.run_id == run_id, _LOG.c.kind.in_(("error", "stage")))
            .order_by(_LOG.c.id)
        ):
            if kind == "error":
                stored_errors[level] = stored_errors.get(level, 0) + 1
            else:
                stages.append((message, (data or {}).get("start"), (data or {}).get("end")))
        telemetry = s.exec(
            sm_select(TelemetrySample).where(TelemetrySample.run_id == run_id).order_by(TelemetrySample.id)
        ).all()
    return recompute(reqs, samples, period_s, errors=stored_errors, stages=stages, telemetry=telemetry)


def store_reported(engine: Engine, run_id: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Store what a one-shot program reported about itself as the run's requests
    (:mod:`edgelab.metrics.reported`) and rewrite its final summary from the stored rows; returns it.
    Idempotent: a request id already stored is kept as it is."""
    from edgelab.metrics.reported import rows as reported_rows

    with session_scope(engine) as s:
        have = {r.request for r in requests_of(s, run_id)}
        new = [r for r in reported_rows(run_id, entries, time.time()) if r["request"] not in have]
        if new:
            s.connection().execute(insert(_REQ), new)
    final = finalize(engine, run_id)
    with session_scope(engine) as s:
        run = get_run(s, run_id)
        old = get_summary(s, run_id, "final")
        if old is not None and "live_equals_final" in old.metrics:
            final["live_equals_final"] = old.metrics["live_equals_final"]
        put_summary(s, run_id, "final", final, run.provenance)
    return final


def store_telemetry(
    engine: Engine, samples: Iterable[ev.ResourceSample], *, run_id: str | None = None
) -> int:
    """Device telemetry outside (or beside) a run, e.g. a sampler left running on a device."""
    rows = [telemetry_row(e, run_id or e.run) for e in samples]
    if rows:
        with engine.begin() as conn:
            conn.execute(insert(_TEL), rows)
    return len(rows)
