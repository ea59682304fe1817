"""The step kinds of a playbook job, each a function of (context, options, deadline).

Each calls the domain layer (probe, artifacts, deploy, metrics); none imports the UI. A step
that cannot be done raises StepFailure with its class (infra / device / test).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from edgelab.errors import (
    BenchFailed,
    ConfigError,
    DeviceStateError,
    EdgelabError,
    NotFound,
    Refusal,
    RefusalCode,
    RemoteTimeout,
    StepFailure,
    TransportError,
)
from edgelab.labels import strategy_label
from edgelab.logs import swallowed
from edgelab.playbook.gates import evaluate
from edgelab.playbook.results import JobResult, StepResult, StepStatus
from edgelab.playbook.schema import Step
from edgelab.states import RunState
from edgelab.store.db import session_scope
from edgelab.transport import Transport
from edgelab.transport.host import host_of

log = logging.getLogger(__name__)

WORKLOAD_PIPELINE = {"tts": "qwen3-tts-0.6b", "vla": "internvla-a1"}  # reference workload -> its pipeline


@dataclass
class JobContext:
    engine: Engine
    device: str
    pipeline: str | None
    variables: dict[str, Any]
    result: JobResult
    playbook: str
    out_dir: Path | None = None
    stop_event: threading.Event = field(default_factory=threading.Event)
    _transport: Any = None
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # step id or "last" -> {run_id, summary}
    deployments: list[int] = field(default_factory=list)

    def play(self, step: Step) -> dict[str, Any]:
        """Who ran a run (its provenance's ``play``): the playbook, this job and the step."""
        return {"playbook": self.playbook, "job": self.result.label, "step": step.id or step.name}

    def transport(self):
        if self._transport is None:
            from edgelab.store.devices import get_device
            from edgelab.transport import open_transport

            with session_scope(self.engine, write=False) as s:
                endpoint = get_device(s, self.device).endpoint()
            try:
                self._transport = open_transport(endpoint, timeout=15)
            except EdgelabError as err:
                raise StepFailure(f"cannot reach {self.device}: {err}", classify(err)) from err
        return self._transport

    def close(self) -> None:
        if self._transport is not None:
            with swallowed(log, "closing the device connection"):
                self._transport.close()
            self._transport = None


def classify(err: BaseException) -> str:
    """Whose fault: a device that is offline/unauthorized or hangs is ``device``; the rest of the
    transport (connection refused, host key, auth) is the lab's, ``infra``."""
    if isinstance(err, DeviceStateError | RemoteTimeout | Refusal):
        return "device"
    if isinstance(err, TransportError):
        return "infra"
    return "infra"


def _left(deadline: float | None, default: float) -> float:
    return default if deadline is None else max(1.0, deadline - time.monotonic())


# ---------------------------------------------------------------- probe


def do_probe(
    ctx: JobContext, step: Step, opts: dict[str, Any], deadline: float | None, out: StepResult
) -> None:
    from edgelab.inventory.probe import probe_device

    snap = probe_device(ctx.engine, ctx.device, timeout=_left(deadline, 60.0))
    ctx.result.facts_hash = snap.facts_hash or ctx.result.facts_hash
    ctx.result.device_class = snap.device_class or ctx.result.device_class
    ctx.result.catalog_entry = snap.catalog_entry or ctx.result.catalog_entry
    if not snap.ok:
        text = snap.error or "probe failed"
        category = (
            "device" if any(w in text.lower() for w in ("unauthorized", "offline", "absent")) else "infra"
        )
        raise StepFailure(f"probe failed: {text}", category)
    out.message = (
        f"{snap.catalog_entry or 'unclassified'} ({snap.device_class or '?'}), facts {snap.facts_hash[:12]}"
    )
    out.details = {"snapshot": snap.id, "facts_hash": snap.facts_hash, "catalog_entry": snap.catalog_entry}


# ---------------------------------------------------------------- push


def do_push(
    ctx: JobContext, step: Step, opts: dict[str, Any], deadline: float | None, out: StepResult
) -> None:
    from edgelab.artifacts.push import BlobSpec, push_to_device
    from edgelab.artifacts.registry import artifact_files, get_artifact
    from edgelab.artifacts.stamps import DbStamps
    from edgelab.store.devices import get_device

    with session_scope(ctx.engine, write=False) as s:
        art = get_artifact(s, str(opts["artifact"]))
        files = artifact_files(s, art)
        device_id = get_device(s, ctx.device).id
    missing = [f.path for f in files if not f.source]
    if missing:
        raise StepFailure(
            f"artifact {art.name}: no local copy of {', '.join(missing)} on the lab host", "infra"
        )
    blobs = [BlobSpec(path=Path(f.source), sha256=f.sha256, size=f.size) for f in files]
    for f in files:
        ctx.result.artifacts[f"{art.name}:{f.path}"] = f.sha256
    res = push_to_device(
        _factory(ctx),
        ctx.device,
        blobs,
        stamps=DbStamps(ctx.engine, device_id),
        verify=bool(opts.get("verify", False)),
        cancel=ctx.stop_event,
    )
    if not res.ok:
        raise StepFailure(f"push of {art.name} failed: {res.error}", "infra")
    out.message = f"{art.name}: {len(blobs)} file(s) present on {ctx.device}"


def _factory(ctx: JobContext):
    def make():
        from edgelab.store.devices import get_device
        from edgelab.transport import open_transport

        with session_scope(ctx.engine, write=False) as s:
            endpoint = get_device(s, ctx.device).endpoint()
        return open_transport(endpoint)

    return make


# ---------------------------------------------------------------- deploy / stop


def do_deploy(
    ctx: JobContext, step: Step, opts: dict[str, Any], deadline: float | None, out: StepResult
) -> None:
    from edgelab.deploy.launch import deploy
    from edgelab.deploy.options import Options
    from edgelab.deploy.planning import DeployRequest
    from edgelab.deploy.supervise import Follow

    pipeline = opts.get("pipeline") or ctx.pipeline
    if not pipeline:
        raise StepFailure("deploy needs a pipeline (step option or the playbook's pipelines:)", "infra")
    req = DeployRequest(
        device=ctx.device, pipeline=str(pipeline), strategy=opts.get("strategy"), runtime=opts.get("runtime")
    )
    # the play's stop (Ctrl-C) aborts a deploy that is starting: what it started is stopped
    dep = deploy(
        ctx.engine,
        req,
        opts=Options(
            ready_timeout_s=_left(deadline, 300.0),
            cancel=ctx.stop_event,
            ephemeral=True,
            play=ctx.play(step),
        ),
        follow=Follow.THREAD,  # ephemeral: followed while the play runs; its stop stores the end
    )  # a killed play's deployment is reaped
    ctx.deployments.append(dep.id)
    out.run_id = dep.run_id
    out.message = (
        f"deployment {dep.id} {dep.state} ({strategy_label(dep.strategy, dep.runtime)}, {dep.runtime})"
    )


def do_stop(
    ctx: JobContext, step: Step, opts: dict[str, Any], deadline: float | None, out: StepResult
) -> None:
    if not ctx.deployments:
        out.message = "nothing of this job is running"
        return
    from edgelab.deploy.supervise import stop  # then the device's log read to its end by the follower

    stopped = []
    while ctx.deployments:
        dep_id = ctx.deployments.pop()
        dep = stop(ctx.engine, dep_id)
        stopped.append(f"{dep.id} {dep.state}")
    out.message = "stopped " + ", ".join(stopped)


# ---------------------------------------------------------------- bench (edgelab.bench's protocol)


def bench_request(ctx: JobContext, opts: dict[str, Any]) -> Any:
    """The step's options as an edgelab.bench request: ``workload: tts|vla`` names the reference
    workload (runtime ``reference``); ``pipeline`` alone lets the planner choose the runtime."""
    from edgelab.bench import BenchRequest

    pipeline = opts.get("pipeline") or ctx.pipeline
    workload = opts.get("workload")
    if workload is None and pipeline is None:
        raise StepFailure(
            "bench needs a workload (tts|vla) or a pipeline (step option or the playbook's pipelines:)",
            "infra",
        )
    pipeline = str(pipeline or WORKLOAD_PIPELINE[str(workload)])
    runtime = opts.get("runtime") or ("reference" if workload else None)
    req = BenchRequest(device=ctx.device, pipeline=pipeline, runtime=runtime, strategy=opts.get("strategy"))
    for key, cast in (
        ("requests", int),
        ("warmup", int),
        ("band", str),
        ("control_hz", float),
        ("frames_per_s", float),
        ("frames", int),
        ("slow_every", int),
        ("slow_ms", float),
    ):
        if opts.get(key) is not None:
            try:
                setattr(req, key, cast(opts[key]))
            except (TypeError, ValueError) as err:
                raise StepFailure(
                    f"bench option {key}: {opts[key]!r} is not a {cast.__name__}", "infra"
                ) from err
    return req


_NOT_STARTED = ("not recognized as the name of", "CommandNotFoundException", ": not found", "No such file")


def _failed_text(err: Any, device: str) -> str:
    """One clear line: a workload that could not even start (no interpreter on the device: exit 127,
    PowerShell's CommandNotFoundException) is said so, with the device's own first error line."""
    lines = [ln.strip() for ln in (err.stderr or "").splitlines() if ln.strip()]
    if err.workload_exit == 127 or any(m in (err.stderr or "") for m in _NOT_STARTED):
        first = next((ln for ln in lines if any(m in ln for m in _NOT_STARTED)), lines[0] if lines else "")
        return (
            f"the workload could not start on {device} (exit {err.workload_exit}): {first[:240]} - the reference "
            f"runtime needs its Python interpreter with edgelab on the device (run {err.run_id} failed)"
        )
    tail = " | ".join(lines[-3:])[:400]
    return f"workload of run {err.run_id} exited {err.workload_exit} on {device}: {tail}"


def _refusal_category(code: str) -> str:
    """An unreachable device is the lab's trouble; any other refusal is the device saying it cannot."""
    return "infra" if code == RefusalCode.DEVICE_UNREACHABLE else "device"


def do_bench(
    ctx: JobContext, step: Step, opts: dict[str, Any], deadline: float | None, out: StepResult
) -> None:
    from edgelab.bench import run_bench
    from edgelab.deploy.options import Options
    from edgelab.store.snapshots import latest_snapshot

    req = bench_request(ctx, opts)
    if not opts.get("endpoint"):
        try:
            with session_scope(ctx.engine, write=False) as s:
                latest_snapshot(s, ctx.device)
        except NotFound as err:
            raise StepFailure(
                f"{ctx.device} has no probe snapshot: bench plans from the device's facts "
                "(put a `probe: {}` step before it)",
                "infra",
            ) from err
    cancel = threading.Event()
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        cancel.set()

    watchdog = (
        threading.Timer(max(0.0, deadline - time.monotonic()), expire) if deadline is not None else None
    )

    def relay_stop() -> None:  # the play's Ctrl-C stops this run too; ends once the run is over
        while not cancel.wait(0.2):
            if ctx.stop_event.is_set():
                cancel.set()

    relay = threading.Thread(target=relay_stop, name=f"play-stop-{ctx.device}", daemon=True)
    if watchdog is not None:
        watchdog.daemon = True
        watchdog.start()
    relay.start()
    try:
        if opts.get("endpoint"):  # a running server: measured from the lab, nothing launched
            from edgelab.bench.endpoint import EndpointBenchRequest, run_endpoint_bench

            res = run_endpoint_bench(
                ctx.engine,
                EndpointBenchRequest(
                    req.pipeline,
                    str(opts["endpoint"]),
                    ctx.device,
                    req.warmup,
                    req.requests,
                    req.band,
                    req.control_hz,
                    dict(opts.get("endpoint_options") or {}),
                ),
                cancel=cancel,
                play=ctx.play(step),
            )
        else:
            res = run_bench(
                ctx.engine, req, opts=Options(transport={"timeout": 15}, play=ctx.play(step)), cancel=cancel
            )
    except Refusal as r:
        out.details = {"refusal": r.to_dict(), "pipeline": req.pipeline}
        raise StepFailure(
            f"refused: {r}" + (f" (-> {r.remedy})" if r.remedy else ""),
            _refusal_category(r.code),
            out.details,
        ) from r
    except BenchFailed as err:
        out.run_id = err.run_id
        raise StepFailure(_failed_text(err, ctx.device), "device", {"pipeline": req.pipeline}) from err
    finally:
        if watchdog is not None:
            watchdog.cancel()
        cancel.set()  # run_bench has returned: this ends the relay thread
    out.run_id = res.run_id
    summary = res.summary
    prov = res.provenance
    ctx.result.facts_hash = ctx.result.facts_hash or prov.get("facts_hash")
    ctx.runs["last"] = {"run_id": res.run_id, "summary": summary, "pipeline": req.pipeline}
    if step.id:
        ctx.runs[step.id] = ctx.runs["last"]
    out.details = {
        "summary": summary,
        "pipeline": req.pipeline,
        "kind": res.kind,
        "virtual": prov.get("virtual"),
        "provenance": prov,
        "protocol": res.meta.get("protocol"),
        "live_equals_final": res.live_equals_final,
    }
    if res.state != RunState.FINISHED:
        why = "passed its step timeout" if timed_out.is_set() else "was stopped"
        raise StepFailure(f"{res.kind} run {res.run_id} {why} and was stopped", "infra", out.details)
    failed = (summary.get("requests") or {}).get("failed") or 0
    if failed:
        raise StepFailure(f"{failed} request(s) failed in run {res.run_id}", "test", out.details)
    out.message = f"run {res.run_id} finished ({req.pipeline}, {_headline(summary)})"


def _headline(summary: dict[str, Any]) -> str:
    audio, action = summary.get("audio"), summary.get("action")
    if audio:
        return (
            f"ttfa p95 {audio['ttfa_ms']['p95']:.0f} ms, rtf_total p95 {audio['rtf_total']['p95']:.3f}, "
            f"underruns {audio['underruns_at_ttfa']}"
        )
    if action:
        misses = action.get("deadline_misses")
        return f"{action['chunks']} chunks, latency p95 {action['latency_ms']['p95']:.1f} ms, misses {misses}"
    return "no figures"


# ---------------------------------------------------------------- gate


def do_gate(
    ctx: JobContext, step: Step, opts: dict[str, Any], deadline: float | None, out: StepResult
) -> None:
    ref = opts.get("run") or "last"
    got = ctx.runs.get(ref)
    if got is None:
        raise StepFailure(
            f"gate has no run to judge ({'no bench step ran before it' if ref == 'last' else ref})", "infra"
        )
    out.run_id = got["run_id"]
    base, unjudged = _baseline(ctx, step, opts, got["run_id"])
    gates = [g for g in step.gates if not (unjudged and g.needs_baseline)]
    results = [evaluate(g, got["summary"], base) for g in gates]
    out.details = {"gates": [{"check": r.gate.text, "ok": r.ok, "actual": r.actual} for r in results]}
    if opts.get("baseline"):
        out.details["baseline"] = (
            {"name": base.name, "runs": base.runs, "comparison": base.comparison.to_dict()} if base else None
        )
        out.details["baseline_name"] = str(opts["baseline"])
    if unjudged:
        out.details["not_judged"] = [g.text for g in step.gates if g.needs_baseline]
    failed = [r for r in results if not r.ok]
    got["gated"] = True
    got["gates_ok"] = not failed
    if failed:
        raise StepFailure("; ".join(r.message for r in failed), "test", out.details)
    out.message = "; ".join([*(r.message for r in results), *([unjudged] if unjudged else [])])


def _baseline(ctx: JobContext, step: Step, opts: dict[str, Any], run_id: str) -> tuple[Any, str | None]:
    """(the baseline's figures, None), or (None, why the relative gates were not judged): a
    baseline not set yet is not judged unless the step says ``missing_baseline: fail``."""
    from edgelab.playbook.relative import baseline_for

    name = opts.get("baseline")
    if not any(g.needs_baseline for g in step.gates):
        return None, None
    if not name:
        raise StepFailure("a relative gate needs the step's baseline: NAME", "infra")
    try:
        with session_scope(ctx.engine, write=False) as s:
            return baseline_for(s, str(name), run_id, confidence=float(opts.get("confidence") or 0.99)), None
    except NotFound as err:
        if opts.get("missing_baseline", "pass") == "fail":
            raise StepFailure(f"baseline {name}: {err}", "test") from err
        return (
            None,
            f"relative gates not judged: no baseline {name} for this run's device and pipeline yet ({err})",
        )
    except ConfigError as err:
        raise StepFailure(f"baseline {name}: {err}", "infra") from err


# ---------------------------------------------------------------- soak


def do_soak(
    ctx: JobContext, step: Step, opts: dict[str, Any], deadline: float | None, out: StepResult
) -> None:
    """Hold the device for ``minutes`` and sample telemetry (memory, load) every ``interval_s``."""
    from edgelab.store.runs import TelemetrySample

    seconds = float(opts["minutes"]) * 60.0
    interval = float(opts.get("interval_s") or 5.0)
    t = ctx.transport()
    end = time.monotonic() + seconds
    if deadline is not None and deadline < end:
        raise StepFailure(f"soak of {seconds:.0f} s does not fit its step timeout", "infra")
    run_id = (ctx.runs.get("last") or {}).get("run_id")
    samples = 0
    while True:
        try:
            avail = _mem_available(t, timeout=max(5.0, interval * 2))
        except EdgelabError as err:
            raise StepFailure(f"device stopped answering during the soak: {err}", classify(err)) from err
        with session_scope(ctx.engine) as s:
            s.add(
                TelemetrySample(
                    run_id=run_id,
                    device_name=ctx.device,
                    t=time.time(),
                    source="playbook-soak",
                    mem_available_bytes=avail,
                )
            )
        samples += 1
        if time.monotonic() + interval > end or ctx.stop_event.wait(interval):
            break  # the soak's time is up, or the play was stopped (Ctrl-C): it ends now
    out.message = f"{samples} telemetry samples over {seconds:.0f} s"
    out.details = {"samples": samples}


def _mem_available(t: Transport, timeout: float) -> int | None:
    """One soak sample: the memory the device has available now (its host layer asks its OS)."""
    return host_of(t).mem_available(timeout=timeout)


# ---------------------------------------------------------------- collect


def do_collect(
    ctx: JobContext, step: Step, opts: dict[str, Any], deadline: float | None, out: StepResult
) -> None:
    """Copy named device files (and the job's run logs) into ``<out>/<device>/``."""
    if ctx.out_dir is None:
        out.status = StepStatus.SKIPPED
        out.message = "no --collect directory given"
        return
    dest = ctx.out_dir / ctx.result.label.replace("/", "_")
    dest.mkdir(parents=True, exist_ok=True)
    got = []
    for remote in opts.get("files") or []:
        local = dest / Path(str(remote)).name
        try:
            sha = ctx.transport().get(str(remote), local)
        except EdgelabError as err:
            raise StepFailure(f"cannot collect {remote}: {err}", classify(err)) from err
        ctx.result.artifacts[f"collected:{remote}"] = sha
        got.append(str(local))
    if opts.get("logs", True):
        from sqlmodel import select

        from edgelab.store.runs import RunLog

        with session_scope(ctx.engine, write=False) as s:
            for rid in ctx.result.run_ids:
                rows = s.exec(select(RunLog).where(RunLog.run_id == rid).order_by(RunLog.id)).all()
                path = dest / f"{rid}.log"
                path.write_text("".join(f"{r.t:.3f} {r.kind} {r.level or ''} {r.message}\n" for r in rows))
                got.append(str(path))
    out.message = f"{len(got)} file(s) in {dest}"
    out.details = {"files": got}


STEPS = {
    "probe": do_probe,
    "push": do_push,
    "deploy": do_deploy,
    "bench": do_bench,
    "gate": do_gate,
    "soak": do_soak,
    "collect": do_collect,
    "stop": do_stop,
}
