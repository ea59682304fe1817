"""Run the study's protocol ``single_request_batch1_v1`` on a device and store its evidence.

Batch 1, concurrency 1: warm-up requests, then measured requests, in one length band; every
request keeps its phase, band, submit/finish times and raw chunks (t, samples, sha256), and the
summary is recomputed from those raw rows. The workload is planned like a deployment (same
strategy choice and admission check, same process command), started through the transport and
its JSON-lines events are ingested with the device clock offset corrected; only the request
count is finite. The plan's launch template names the adapter that reads the output: edgelab
events (the reference runtime, a team's own controller) are ingested from the process's stdout;
llama-server (llama.cpp under S3) is started detached and measured from the lab side through a
forwarded port (edgelab.deploy.llama_drive).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import KW_ONLY, dataclass, field
from functools import partial
from typing import Any

from sqlalchemy import Engine

from edgelab.bench.sink import RunSink
from edgelab.bench.steps import (
    PROTOCOL,
    Admit,
    BenchContext,
    Command,
    Connect,
    Plan,
    Push,
    Record,
)
from edgelab.deploy import remote, start
from edgelab.deploy.options import Options
from edgelab.deploy.pipeline import Launch, PhaseEvent, Step, under_lease
from edgelab.deploy.plan import programs
from edgelab.deploy.planning import LaunchTarget
from edgelab.errors import ConfigError
from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.runtimes.spec import Adapter
from edgelab.states import RunState
from edgelab.store.db import session_scope
from edgelab.store.runs import get_run

log = logging.getLogger(__name__)

BANDS = ("short", "medium", "long")


@dataclass
class BenchRequest(LaunchTarget):
    """What to measure: a deploy's target (device, pipeline, strategy, runtime, model, values,
    threads, lab_host_build, target) and the protocol's counts; the reference knobs (frames,
    pace, slow steps) shape the workload, not the protocol."""

    _: KW_ONLY
    warmup: int = 1
    requests: int = 20
    band: str = "short"
    control_hz: float = 10.0  # VLA control rate
    frames_per_s: float | None = None  # reference talker pace (None: the workload's default)
    frames: int | None = None  # reference: codec frames per request (None: from the band's text)
    slow_every: int = 0  # reference VLA: inject a slow step every N inferences
    slow_ms: float = 0.0
    ready_timeout: float | None = None  # llama-server start-up limit (default 120 s)
    hog: int = 0  # S3 controller: fault injection, N busy CPU processes beside the control loop


@dataclass
class BenchResult:
    run_id: str
    state: str
    kind: str  # tts | vla
    summary: dict[str, Any]
    live_equals_final: bool
    provenance: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    def report(self) -> dict[str, Any]:
        """The headline figures of the protocol, with counts (what the CLI prints)."""
        s = self.summary
        out: dict[str, Any] = {
            "run": self.run_id,
            "state": self.state,
            "protocol": PROTOCOL,
            "virtual": self.provenance.get("virtual"),
            "requests": s.get("requests"),
        }
        if s.get("audio"):
            a = s["audio"]
            out["audio"] = {
                k: a[k]
                for k in (
                    "ttfa_ms",
                    "playback_start_ms",
                    "underruns_at_ttfa",
                    "stall_ms_at_ttfa",
                    "rtf_streamed",
                    "rtf_total",
                    "chunk_gaps_ms",
                )
            }
        if self.provenance.get("endpoint"):
            out["endpoint"] = self.provenance["endpoint"]
            out["runtime"] = self.provenance.get("runtime")
            out["weights"] = self.provenance.get("weights")
        if self.meta.get("llama"):
            ll = self.meta["llama"]
            out["text"] = {
                k: ll.get(k)
                for k in (
                    "ttft_ms",
                    "itl_ms",
                    "decode_tok_s",
                    "server_prompt_ms",
                    "server_predicted_per_second",
                    "peak_rss_bytes",
                    "failed",
                )
            }
            out["placement"] = (self.meta.get("placement") or {}).get("observed")
        elif s.get("text"):
            out["text"] = s["text"]
        if self.meta.get("llama_bench") is not None:
            out["llama_bench"] = {
                r["test"]: {
                    k: r.get(k) for k in ("avg_ts", "stddev_ts", "n_threads", "backends", "build_commit")
                }
                for r in self.meta["llama_bench"]
            }
        if self.meta.get("llama_tts") is not None:  # S5: llama-tts, one process per request
            out["llama_tts"] = llama_tts_report(self.meta["llama_tts"])
            out["placement"] = (self.meta.get("placement") or {}).get("observed")
        if s.get("action"):
            a = s["action"]
            out["action"] = {
                k: a.get(k)
                for k in (
                    "chunks",
                    "control_period_ms",
                    "latency_ms",
                    "age_ms",
                    "deadline_misses",
                    "stale_aligned",
                    "stale_dropped",
                )
            }
        if self.meta.get("controller") is not None:  # a real runtime under edgelab's S3 controller
            out["runtime"] = self.provenance.get("runtime")
            out["weights"] = self.meta.get("weights")
            out["model"] = self.provenance.get("models")
            out["placement"] = self.provenance.get("placement")
            out["controller"] = self.meta.get("controller")
            out["parity"] = self.meta.get("parity")
        if self.meta.get("virtual_note"):
            out["note"] = self.meta["virtual_note"]
            out["emulated"] = bool(self.meta.get("emulated"))
        out["strategy"] = self.provenance.get("strategy_label") or self.provenance.get("strategy")
        out["provenance"] = dict(self.provenance)  # whole: the same block `runs show` holds
        return out


def llama_tts_report(records: list[dict[str, Any]]) -> dict[str, Any]:
    """llama-tts's own figures over every run, warm-up included (its log: load, generation frames/s; the
    group's sampled peak RSS), beside the events' TTFA and RTF."""
    from edgelab.metrics.stats import summarize

    logs = [r.get("log") or {} for r in records]
    return {
        "runs": len(records),
        "load_s": summarize(lg.get("load_s") for lg in logs),
        "total_s": summarize(lg.get("total_s") for lg in logs),
        "generation_frames_per_s": summarize(lg.get("frames_per_s") for lg in logs),
        "vocoder_s": summarize(lg.get("vocoder_s") for lg in logs),
        "frames": sorted({lg.get("frames") for lg in logs if lg.get("frames") is not None}),
        "peak_rss_bytes": max((r.get("peak_rss_bytes") or 0 for r in records), default=0) or None,
    }


def check_protocol(band: str, warmup: int, requests: int, control_hz: float) -> None:
    """The measured-run protocol's own bounds, for a launched workload and an external endpoint alike."""
    if band not in BANDS:
        raise ConfigError(f"unknown band {band!r}", remedy=f"use one of {', '.join(BANDS)}")
    if warmup < 0 or requests < 1:
        raise ConfigError(
            "the protocol needs warm-up >= 0 and at least one measured request",
            remedy="pass --warmup 1 --requests 20 (the study's minimum)",
        )
    if control_hz <= 0:
        raise ConfigError("--control-hz must be positive", remedy="pass e.g. --control-hz 10")


def _validate(req: BenchRequest) -> None:
    check_protocol(req.band, req.warmup, req.requests, req.control_hz)


def run_bench(
    engine: Engine,
    req: BenchRequest,
    *,
    opts: Options | None = None,
    on_event: Callable[[ev.Event], None] | None = None,
    cancel: threading.Event | None = None,
    lease_id: str | None = None,
) -> BenchResult:
    """Plan, admit, start the workload, ingest its events until it ends; returns the stored result.

    Runs under a lease on the device (the caller's ``lease_id`` / ``EDGELAB_LEASE``, the holder's
    own, or one of its own), renewed while it runs; a lease lost meanwhile (kicked) stops the run.
    Its memory is reserved in the same ledger as deployments' for as long as it runs.
    Refused (LeaseHeld, Refusal) before anything starts when the plan cannot run; Ctrl-C stops the
    remote process and leaves the run ``stopped`` with what was measured so far. Setting ``cancel``
    (a caller's timeout or stop) does the same without an exception: the result's state is ``stopped``.
    """
    _validate(req)
    cancel = cancel if cancel is not None else threading.Event()
    with Launch(
        under_lease(
            engine,
            BENCH,
            partial(BenchContext, request=req, on_event=on_event, cancel=cancel),
            device=req.device,
            what=f"bench {req.pipeline}",
            log=log,
            opts=opts,
            lease_id=lease_id,
            on_lost=lambda _why: cancel.set(),
        )
    ) as steps:
        ctx = steps.run()
    final, run_id = ctx.result, ctx.run_id
    with session_scope(engine, write=False) as s:
        run = get_run(s, run_id)  # as the measurement ended it: state, provenance, meta
        return BenchResult(
            run_id,
            run.state,
            ctx.kind,
            final,
            bool(final.get("live_equals_final")),
            dict(run.provenance),
            dict(run.meta),
        )


class Measure(Step):
    """The workload started and measured by the plan's adapter until it ends; its summary is the result."""

    def run(self, ctx: BenchContext) -> Iterator[PhaseEvent]:
        ctx.result = _measure(ctx)
        yield PhaseEvent("measured", {"total_s": round(ctx.phases.total(), 2)})


BENCH: tuple[Step, ...] = (Plan(), Record(), Admit(), Connect(), Push(), Command(), Measure())


def _measure(ctx: BenchContext) -> dict[str, Any]:
    engine, req, opts, run_id, t = ctx.engine, ctx.request, ctx.opts, ctx.run_id, ctx.transport
    p, adapter, meta, blob_paths = ctx.plan, ctx.adapter, ctx.meta, ctx.blob_paths
    proc = p.processes[0]
    assert t is not None and ctx.offset is not None
    if adapter == Adapter.LLAMA_SERVER:  # started detached, measured from the lab through a forwarded port
        final, state = _bench_llama(
            engine,
            t,
            proc,
            ctx.workdir,
            blob_paths,
            run_id,
            req,
            meta,
            ctx.on_event,
            ctx.cancel,
            beside=_telemetry_beside(engine, run_id, req.device, opts),
        )
    elif adapter == Adapter.LLAMA_TTS:  # one process per request (S5): its log and its WAV
        from edgelab.bench.oneshot import bench_llama_tts

        final, state = bench_llama_tts(
            engine,
            t,
            proc,
            ctx.workdir,
            blob_paths,
            run_id,
            device=req.device,
            pipeline=p.pipeline,
            warmup=req.warmup,
            requests=req.requests,
            band=req.band,
            virtual=bool(p.virtual),
            on_event=ctx.on_event,
            cancel=ctx.cancel,
            beside=_telemetry_beside(engine, run_id, req.device, opts),
        )
    else:  # streamed: its stdout is the output its adapter reads
        start.layout(t, ctx.bin_dir, proc.links, blob_paths, programs(proc))
        if adapter == "llama-bench":
            final, state = _llama_bench(engine, t, ctx.command, run_id, meta)
        else:
            seen = _Reported(ctx.on_event)  # what the workload's run.start reports goes to provenance
            try:
                final, state = _stream(
                    engine,
                    t,
                    ctx.command,
                    run_id,
                    ctx.offset,
                    seen,
                    ctx.cancel,
                    beside=_telemetry_beside(engine, run_id, req.device, opts),
                )
            finally:
                seen.store(engine, run_id)
    return final


def _llama_bench(
    engine: Engine, t, argv: list[str], run_id: str, meta: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    """llama-bench's own tests (prompt processing, generation) read from its JSON output and stored."""
    from edgelab.adapters.llama_bench import parse_bench
    from edgelab.adapters.llama_placement import parse_placement
    from edgelab.errors import BenchOutputError

    sink = RunSink(engine, run_id)
    res = t.run(argv, timeout=1800)
    state, error = None, None
    try:
        records = parse_bench(res.stdout) if res.ok else []
        if not res.ok:
            state, error = RunState.FAILED, f"llama-bench exited {res.exit_code}: {res.stderr.strip()[-300:]}"
    except BenchOutputError as e:
        records, state, error = [], RunState.FAILED, str(e)
    meta["llama_bench"] = [r.to_dict() for r in records]
    if records:  # llama-bench's own figures, one request per repetition of each test (banded by test)
        from edgelab.metrics.ingest import store_reported
        from edgelab.metrics.reported import from_llama_bench

        store_reported(engine, run_id, from_llama_bench(meta["llama_bench"]))
    meta["placement"] = {"observed": parse_placement(res.stderr).observed or "unobserved"}
    with session_scope(engine) as s:
        run = get_run(s, run_id)
        run.meta = {**run.meta, **meta}
        s.add(run)
    for line in res.stderr.splitlines()[-50:]:
        sink.ing.feed(ev.LogLine(t=time.time(), stream="stderr", line=line))
    return sink.end(
        state or RunState.FINISHED,
        error,
        remedy=f"see `edgelab runs show {run_id}`",
        run_end=False,  # llama-bench sends no events: the run ends with its own figures
        workload_exit=res.exit_code,
        stderr=res.stderr,
    )


def _bench_llama(
    engine: Engine,
    t,
    proc,
    workdir: str,
    blob_paths: dict[str, str],
    run_id: str,
    req: BenchRequest,
    meta: dict[str, Any],
    on_event: Callable[[ev.Event], None] | None,
    cancel: threading.Event | None,
    beside: Callable[[Ingestor], Any] | None = None,
) -> tuple[dict[str, Any], str]:
    """llama-server started detached on the device, measured through a forwarded port, then stopped."""
    from edgelab.adapters.llama_placement import parse_placement
    from edgelab.deploy import llama_drive as llama

    feed = RunSink(engine, run_id, on_event)
    ing = feed.ing
    sampler = beside(ing) if beside is not None else None
    started = start.start(t, proc, workdir, blob_paths)
    result = llama.DriveResult()
    try:
        with feed.measuring(sampler):
            feed.start(
                req.pipeline,
                req.device,
                proc.runtime,
                {"adapter": proc.adapter},
                virtual=bool(meta.get("virtual_note")),
                strategy="S3",
            )
            result = llama.drive(
                t,
                int(proc.port),
                started.pid,
                run=run_id,
                device=req.device,
                feed=feed,
                warmup=req.warmup,
                requests=req.requests,
                band=req.band,
                ready_timeout=req.ready_timeout or 120.0,
                cancel=cancel,
            )
            if cancel is not None and cancel.is_set():
                feed.stopped()
    finally:
        left = remote.stop(t, started.pid, 5)
        log = remote.read_file(t, f"{workdir}/stderr.log", 1 << 20)
        pl = parse_placement(log)
        meta["placement"] = {
            "observed": pl.observed or "unobserved",
            "evidence": pl.to_dict(),
            "planned": "cpu" if (proc.values.get("gpu_layers") in (None, "0")) else "gpu",
        }
        meta["llama"] = llama.report(result)
        meta["records"] = result.records
        meta["server_metrics"] = result.metrics_scrape
        meta["left_processes"] = left
        if left and feed.state is None:
            feed.state, feed.error = RunState.FAILED, f"{left} processes survived the stop"
        with session_scope(engine) as s:
            run = get_run(s, run_id)
            run.meta = {**run.meta, **meta}
            s.add(run)
        for line in log.splitlines()[-50:]:
            ing.feed(ev.LogLine(t=time.time(), stream="stderr", line=line))
    return feed.end(
        feed.state, feed.error, remedy=f"see `edgelab runs show {run_id}` and the server log in it"
    )


class _Reported:
    """What the workload says about itself beyond its events (the controller's summary line), kept
    for the run's meta after the stream ends."""

    def __init__(self, then: Callable[[ev.Event], None] | None):
        self.then = then
        self.start: dict[str, Any] = {}
        self.controller: dict[str, Any] | None = None

    def __call__(self, e: ev.Event) -> None:
        if isinstance(e, ev.RunStart):
            self.start = dict(e.meta or {})
        elif isinstance(e, ev.LogLine) and e.stream == "controller" and e.level == "summary":
            import json

            try:
                self.controller = json.loads(e.line)
            except ValueError:
                self.controller = {"unparsed": e.line[:500]}
        if self.then:
            self.then(e)

    def store(self, engine: Engine, run_id: str) -> None:
        """The controller's summary into the run's meta (placement is stored by ingest from run.start)."""
        if self.controller is None:
            return  # the reference workload: nothing beyond its events
        with session_scope(engine) as s:
            run = get_run(s, run_id)
            meta = dict(run.meta)
            meta["controller"] = self.controller
            meta["weights"] = self.start.get("weights", meta.get("weights"))
            run.meta = meta
            s.add(run)


def _telemetry_beside(engine: Engine, run_id: str, device: str, opts: Options) -> Callable[[Ingestor], Any]:
    """Starts the device's telemetry sampler beside the workload, its samples fed to the run."""
    from edgelab.metrics.sampler import start_beside

    return lambda ing: start_beside(engine, run_id, device, ing, transport=opts.transport)


def _stream(
    engine: Engine,
    t,
    argv: list[str],
    run_id: str,
    offset: ev.ClockOffset,
    on_event: Callable[[ev.Event], None] | None,
    cancel: threading.Event | None = None,
    beside: Callable[[Ingestor], Any] | None = None,
) -> tuple[dict[str, Any], str]:
    sink = RunSink(engine, run_id)
    ing = sink.ing
    sampler = beside(ing) if beside is not None else None
    proc = t.stream(argv)
    state, error, code = None, None, None
    done = threading.Event()
    if cancel is not None:

        def watch() -> None:  # a silent workload yields no event to check on, so a thread watches
            while not done.wait(0.2):
                if cancel.is_set():
                    proc.cancel()
                    return

        threading.Thread(target=watch, name=f"bench-cancel-{run_id}", daemon=True).start()
    try:
        for e in ev.decode_lines(proc.lines()):
            if e.run is not None and e.run != run_id:
                continue  # never mix another run's events in
            if not isinstance(e, ev.LogLine):  # a non-event line was stamped on arrival (lab clock)
                offset.correct(e)
            ing.feed(e)
            if on_event:
                on_event(e)
        code = proc.wait(timeout=30)
        if cancel is not None and cancel.is_set():
            state, error = RunState.STOPPED, "cancelled by the caller (timeout or stop)"
        elif code not in (0, None):
            state, error = RunState.FAILED, f"workload exited {code}: {proc.stderr.strip()[-300:]}"
    except KeyboardInterrupt:
        proc.cancel()
        state, error = RunState.STOPPED, "interrupted (SIGINT) during bench"
        ing.close(state=state, error=error)
        raise
    except BaseException as exc:
        proc.cancel()
        ing.close(state=RunState.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000])
        raise
    finally:
        done.set()
        if sampler is not None:
            sampler.stop()  # its last samples are in the ingestor's queue: close() feeds them
    err_text = proc.stderr.strip()
    if err_text:
        import time

        for line in err_text.splitlines()[-50:]:
            ing.feed(ev.LogLine(t=time.time(), stream="stderr", line=line))
    return sink.end(
        state,
        error,
        remedy=f"see `edgelab runs show {run_id}`",
        run_end=False,  # the workload sent its own run.end
        workload_exit=code,
        stderr=err_text,
    )
