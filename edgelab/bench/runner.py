"""Run the study's protocol ``single_request_batch1_v1`` on a device and store its evidence.

Batch 1, concurrency 1: warm-up requests, then measured requests, in one length band; every
request keeps its phase, band, submit/finish times and raw chunks (t, samples, sha256), and the
summary is recomputed from those raw rows. The workload is planned like a deployment (same
strategy choice and admission check, same process command), started through the transport and
its JSON-lines events are ingested with the device clock offset corrected; only the request
count is finite. Today the ``reference`` runtime is the one whose output has an adapter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from edgelab.deploy import lifecycle
from edgelab.deploy.clock import measure_offset
from edgelab.deploy.lifecycle import DeployRequest, Options
from edgelab.deploy.refusal import Refusal
from edgelab.errors import ConfigError, EdgelabError, TransportError
from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.metrics.provenance import for_plan
from edgelab.store.db import session_scope
from edgelab.store.devices import get_device
from edgelab.store.runs import create_run, get_run, new_run_id
from edgelab.transport.quoting import Shell, join

PROTOCOL = "single_request_batch1_v1"
BANDS = ("short", "medium", "long")


@dataclass
class BenchRequest:
    """What to measure; the reference knobs (frames, pace, slow steps) shape the workload, not the protocol."""

    device: str
    pipeline: str
    runtime: str | None = None
    strategy: str | None = None
    warmup: int = 1
    requests: int = 20
    band: str = "short"
    control_hz: float = 10.0  # VLA control rate
    frames_per_s: float | None = None  # reference talker pace (None: the workload's default)
    frames: int | None = None  # reference: codec frames per request (None: from the band's text)
    slow_every: int = 0  # reference VLA: inject a slow step every N inferences
    slow_ms: float = 0.0


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
        out: dict[str, Any] = {"run": self.run_id, "state": self.state, "protocol": PROTOCOL,
                               "virtual": self.provenance.get("virtual"), "requests": s.get("requests")}
        if s.get("audio"):
            a = s["audio"]
            out["audio"] = {k: a[k] for k in ("ttfa_ms", "playback_start_ms", "underruns_at_ttfa",
                                              "stall_ms_at_ttfa", "rtf_streamed", "rtf_total", "chunk_gaps_ms")}
        if self.provenance.get("endpoint"):
            out["endpoint"] = self.provenance["endpoint"]
            out["runtime"] = self.provenance.get("runtime")
            out["weights"] = self.provenance.get("weights")
        if s.get("action"):
            a = s["action"]
            out["action"] = {k: a.get(k) for k in ("chunks", "control_period_ms", "latency_ms", "age_ms",
                                                   "deadline_misses", "stale_aligned", "stale_dropped")}
        return out


class BenchFailed(EdgelabError):
    """The workload started but did not finish; its run (``run_id``) is stored as failed."""

    def __init__(self, message: str, *, run_id: str, remedy: str, exit_code: int | None = None,
                 stderr: str = ""):
        super().__init__(message, remedy=remedy)
        self.run_id = run_id
        self.exit_code = exit_code
        self.stderr = stderr


def _validate(req: BenchRequest) -> None:
    if req.band not in BANDS:
        raise ConfigError(f"unknown band {req.band!r}", remedy=f"use one of {', '.join(BANDS)}")
    if req.warmup < 0 or req.requests < 1:
        raise ConfigError("the protocol needs warm-up >= 0 and at least one measured request",
                          remedy="pass --warmup 1 --requests 20 (the study's minimum)")
    if req.control_hz <= 0:
        raise ConfigError("--control-hz must be positive", remedy="pass e.g. --control-hz 10")


def workload_argv(base: list[str], kind: str, req: BenchRequest, run_id: str) -> list[str]:
    """The plan's reference command with the protocol's finite request count."""
    argv = list(base[:4])  # python -m edgelab.reference tts|vla
    if kind == "tts":
        argv += ["--band", req.band, "--warmup", str(req.warmup), "--requests", str(req.requests)]
        if req.frames_per_s is not None:
            argv += ["--frames-per-s", f"{req.frames_per_s:g}"]
        if req.frames is not None:
            argv += ["--frames", str(req.frames)]
        sched = base[base.index("--schedule") + 1] if "--schedule" in base else None
        if sched:
            argv += ["--schedule", sched]
    else:
        argv += ["--control-hz", f"{req.control_hz:g}", "--steps", str(req.warmup + req.requests)]
        if req.slow_every:
            argv += ["--slow-every", str(req.slow_every), "--slow-ms", f"{req.slow_ms:g}"]
    return argv + ["--run", run_id, "--device", req.device]


def _reference_process(planned: lifecycle.Planned) -> list[str]:
    p = planned.plan
    for proc in p.processes:
        if "edgelab.reference" in proc.argv:
            kind = proc.argv[proc.argv.index("edgelab.reference") + 1]
            if kind.startswith("unsupported:"):
                break
            return proc.argv
    raise Refusal("no_exported_graph", f"{p.pipeline} on {p.runtime} has no bench adapter here (the reference "
                  "runtime's tts and vla workloads have one)", device=p.device, strategy=p.strategy,
                  remedy="bench a tts or vla pipeline with --runtime reference")


def run_bench(engine: Engine, req: BenchRequest, *, opts: Options | None = None,
              on_event: Callable[[ev.Event], None] | None = None,
              cancel: threading.Event | None = None) -> BenchResult:
    """Plan, start the workload, ingest its events until it ends; returns the stored result.

    Refused (Refusal) before anything starts when the plan cannot run; Ctrl-C stops the remote
    process and leaves the run ``stopped`` with what was measured so far. Setting ``cancel`` (a
    caller's timeout or stop) does the same without an exception: the result's state is ``stopped``.
    """
    _validate(req)
    opts = opts or Options()
    run_id = new_run_id()
    planned = lifecycle.plan(engine, DeployRequest(req.device, req.pipeline, req.strategy, req.runtime),
                             run_id=run_id)
    if planned.refusal:
        raise planned.refusal
    base = _reference_process(planned)
    kind = base[base.index("edgelab.reference") + 1]
    argv = workload_argv(base, kind, req, run_id)
    p = planned.plan
    meta: dict[str, Any] = {"protocol": PROTOCOL, "band": req.band if kind == "tts" else None,
                            "warmup": req.warmup, "requests": req.requests, "batch": 1, "concurrency": 1,
                            "weights": "random" if p.runtime == "reference" else None}
    if kind == "vla":
        meta.update(control_hz=req.control_hz, control_period_s=1.0 / req.control_hz,
                    slow_every=req.slow_every, slow_ms=req.slow_ms)
    with session_scope(engine) as s:
        device = get_device(s, req.device)
        endpoint = device.endpoint()
        shell = Shell(device.shell)
        prov = for_plan(s, device=device.name, virtual=bool(device.virtual), plan=p.to_dict(),
                        facts_hash=planned.facts_hash, profile=planned.profile.device_class,
                        command=join(argv, shell), source=f"bench:{PROTOCOL}", run_id=run_id)
        meta["weights"] = prov["weights"]
        create_run(s, id=run_id, pipeline=p.pipeline, device_name=device.name, runtime=p.runtime,
                   strategy=p.strategy, kind="bench", virtual=bool(device.virtual), command=prov["command"],
                   provenance=prov, meta=meta)
    try:
        t = lifecycle._connect(endpoint, opts)
    except TransportError as e:
        _fail(engine, run_id, f"device unreachable: {e}")
        raise Refusal("device_unreachable", str(e), device=req.device,
                      remedy=e.remedy or f"run `edgelab device check {req.device}`") from e
    try:
        offset = measure_offset(t)
        meta["clock"] = {"offset_s": offset.offset_s, "rtt_s": offset.rtt_s}
        with session_scope(engine) as s:
            run = get_run(s, run_id)
            run.meta = dict(meta)
            s.add(run)
        final, state = _stream(engine, t, argv, run_id, offset, on_event, cancel,
                               beside=_telemetry_beside(engine, run_id, req.device, opts))
    finally:
        t.close()
    with session_scope(engine, write=False) as s:
        run = get_run(s, run_id)
        return BenchResult(run_id, run.state, kind, final, bool(final.get("live_equals_final")),
                           dict(run.provenance), dict(run.meta))


def _telemetry_beside(engine: Engine, run_id: str, device: str, opts: Options) -> Callable[[Ingestor], Any]:
    """Starts the device's telemetry sampler beside the workload, its samples fed to the run."""
    from edgelab.metrics.sampler import start_beside

    return lambda ing: start_beside(engine, run_id, device, ing, transport=opts.transport)


def _stream(engine: Engine, t, argv: list[str], run_id: str, offset: ev.ClockOffset,
            on_event: Callable[[ev.Event], None] | None,
            cancel: threading.Event | None = None,
            beside: Callable[[Ingestor], Any] | None = None) -> tuple[dict[str, Any], str]:
    ing = Ingestor(engine, run_id)
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
            state, error = "stopped", "cancelled by the caller (timeout or stop)"
        elif code not in (0, None):
            state, error = "failed", f"workload exited {code}: {proc.stderr.strip()[-300:]}"
    except KeyboardInterrupt:
        proc.cancel()
        state, error = "stopped", "interrupted (SIGINT) during bench"
        final = ing.close(state=state, error=error)
        raise
    except BaseException as exc:
        proc.cancel()
        ing.close(state="failed", error=f"{type(exc).__name__}: {exc}"[:2000])
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
    final = ing.close(state=state, error=error)
    if state == "failed":
        raise BenchFailed(f"bench run {run_id} failed: {error}", run_id=run_id,
                          remedy=f"see `edgelab runs show {run_id}`", exit_code=code, stderr=err_text)
    return final, state or "finished"


def _fail(engine: Engine, run_id: str, why: str) -> None:
    from edgelab.store.runs import set_state

    with session_scope(engine) as s:
        set_state(s, get_run(s, run_id), "failed", error=why)
