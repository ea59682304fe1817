"""Bench: the launch pipeline's bench composition (plan, record, admit, connect, push, command, measure).

The same steps as a deploy (:mod:`edgelab.deploy.pipeline`), each with what a measured run does
differently: the plan is a template's bench variant with the protocol's counts; the run is
recorded before its admission (a refusal leaves it ``failed``, saying why); the reservation is
the run's own, released when it ends whatever happened; the process is started by the adapter
that measures it (``Measure``), not detached.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from edgelab.catalog.pipelines import load_pipelines
from edgelab.deploy import admission, planning, remote, start
from edgelab.deploy import artifacts as plan_artifacts
from edgelab.deploy.clock import measure_offset
from edgelab.deploy.pipeline import LaunchContext, PhaseEvent, Step
from edgelab.deploy.planning import DeployRequest
from edgelab.deploy.record import record_run
from edgelab.deploy.strategies.controller import has_controller
from edgelab.errors import Refusal, RefusalCode
from edgelab.metrics import events as ev
from edgelab.runtimes.spec import Adapter
from edgelab.states import RunState
from edgelab.store.db import session_scope
from edgelab.store.deployments import release_run
from edgelab.store.devices import get_device
from edgelab.store.runs import get_run
from edgelab.transport.quoting import Shell, join

PROTOCOL = "single_request_batch1_v1"


@dataclass
class BenchContext(LaunchContext):
    """The launch context and what only a bench holds: its request, the workload's kind, the
    adapter that reads it, the run's meta as it grows, the caller's stop and event sink."""

    request: Any = None  # edgelab.bench.runner.BenchRequest
    on_event: Callable[[ev.Event], None] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    kind: str = ""  # tts | vla | text_lm
    adapter: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    admitted: bool = False
    offset: ev.ClockOffset | None = None
    workdir: str = ""
    command: list[str] = field(default_factory=list)  # as it runs: environment and store paths bound
    bin_dir: str = ""


class Plan(Step):
    """The bench variant of the plan, with the protocol's counts as template values; refused
    (with the remedy) before anything is recorded when it cannot run or has no bench adapter."""

    def run(self, ctx: BenchContext) -> Iterator[PhaseEvent]:
        req, engine = ctx.request, ctx.engine
        kind = ctx.kind = load_pipelines()[planning.resolve_pipeline(req.pipeline)].kind
        model = parity = None
        if kind == "vla" and has_controller(req.runtime, kind) and req.model is None:  # export + register
            from edgelab.bench.controller import prepare

            model, parity = prepare(engine, req.runtime, kind, planning.resolve_pipeline(req.pipeline))
        planned = ctx.planned = planning.plan(
            engine,
            DeployRequest(
                **{**req.target_fields(), "values": {**template_values(kind, req), **req.values}},
                purpose="bench",
            ),
            run_id=ctx.run_id,
        )
        if planned.refusal:
            raise planned.refusal
        ctx.phases("planned", strategy=planned.plan.strategy, runtime=planned.plan.runtime)
        ctx.adapter = adapter_of(planned)
        p = planned.plan
        proc = p.processes[0]
        meta = ctx.meta = {
            "protocol": PROTOCOL,
            "band": req.band if kind in ("tts", "text_lm") else None,
            "warmup": req.warmup,
            "requests": req.requests,
            "batch": 1,
            "concurrency": 1,
            "template": proc.template,
            "target": proc.target,
        }
        if req.values:
            meta["options"] = dict(req.values)
        if planned.virtual and p.runtime != "reference":
            meta["virtual_note"] = (
                f"virtual device: {p.execution['label']}" if p.execution else "virtual device: lab host build"
            )
            if p.execution:
                meta["execution"] = p.execution
                meta["emulated"] = p.emulated
        if kind == "vla":
            meta.update(
                control_hz=req.control_hz,
                control_period_s=1.0 / req.control_hz,
                slow_every=req.slow_every,
                slow_ms=req.slow_ms,
            )
        if model is not None:
            meta.update(parity=parity, cpu_hog=req.hog, export=model.as_dict())
        return iter(())


class Record(Step):
    """The run with its provenance, before its admission (its refusal is stored on it)."""

    def run(self, ctx: BenchContext) -> Iterator[PhaseEvent]:
        p = ctx.plan
        with session_scope(ctx.engine) as s:
            device = get_device(s, ctx.request.device)
            ctx.endpoint, ctx.device_id, ctx.device_name = device.endpoint(), device.pk, device.name
            ctx.shell = Shell(device.shell)
            ctx.plan_dict = p.to_dict()
            record_run(
                s,
                ctx.planned,
                run_id=ctx.run_id,
                kind="bench",
                source=f"bench:{PROTOCOL}",
                device=device.name,
                virtual=bool(device.virtual),
                command=join(p.processes[0].argv, ctx.shell),
                plan=ctx.plan_dict,
                meta=ctx.meta,
                play=ctx.opts.play,
                meta_from_provenance=("weights", "threads"),
            )
        return iter(())


class Admit(Step):
    """The run's reservation, in the same ledger as deployments' (check and reserve in one
    transaction); released when the bench ends, whatever happened."""

    def run(self, ctx: BenchContext) -> Iterator[PhaseEvent]:
        try:
            with session_scope(ctx.engine) as s:
                lines = admission.admit(
                    s,
                    get_device(s, ctx.request.device),  # loaded to reserve its pools in this transaction
                    ctx.planned.profile,
                    ctx.plan,
                    run_id=ctx.run_id,
                    lease_id=ctx.lease_id,
                )
                ctx.meta["admission"] = [line.to_dict() for line in lines]
        except Refusal as r:
            fail_run(ctx, f"refused by admission: {r}")
            raise
        ctx.admitted = True
        yield PhaseEvent("admitted")

    def close(self, ctx: BenchContext) -> None:
        if ctx.admitted:
            with session_scope(ctx.engine) as s:
                release_run(s, ctx.run_id)


class Connect(Step):
    """The device's transport and its clock's offset from the lab's (events are corrected by it)."""

    def run(self, ctx: BenchContext) -> Iterator[PhaseEvent]:
        try:
            t = ctx.connect()
        except Refusal as r:
            fail_run(ctx, f"device unreachable: {r.detail}")
            raise
        offset = ctx.offset = measure_offset(t)
        ctx.meta["clock"] = {"offset_s": offset.offset_s, "rtt_s": offset.rtt_s}
        return iter(())

    def close(self, ctx: BenchContext) -> None:
        if ctx.transport is not None:
            ctx.transport.close()


class Push(Step):
    """The plan's artifacts into the device's store."""

    def run(self, ctx: BenchContext) -> Iterator[PhaseEvent]:
        assert ctx.transport is not None and ctx.device_id is not None
        ctx.blob_paths, ctx.pushed = plan_artifacts.push(ctx.engine, ctx.transport, ctx.device_id, ctx.plan)
        return iter(())


class Command(Step):
    """The command as it will run (store paths bound, in the run's folder), stored in the run
    before it starts: the reaper finds a detached process's pid file from its workdir."""

    def run(self, ctx: BenchContext) -> Iterator[PhaseEvent]:
        assert ctx.transport is not None
        proc = ctx.plan.processes[0]
        ctx.workdir = f"{remote.run_root(ctx.transport)}/{ctx.run_id}/{proc.name}"
        argv, env, ctx.bin_dir = start.bound(proc, ctx.workdir, ctx.blob_paths)
        ctx.command = (["env", *[f"{k}={v}" for k, v in env.items()]] if env else []) + argv
        ctx.meta["workdir"] = ctx.workdir  # where a detached process leaves its pid file
        _set_meta(ctx, join(ctx.command, ctx.shell))
        return iter(())


def template_values(kind: str, req: Any) -> dict[str, Any]:
    """The protocol's finite counts as launch template values (the plan's template does the rest)."""
    if kind == "tts":
        from edgelab.reference.tts import BAND_TEXTS, frames_for_text

        text = BAND_TEXTS[req.band]
        return {
            "band": req.band,
            "warmup": req.warmup,
            "requests": req.requests,
            # unpaced unless asked: the workload's own default talker speed, 2x real time
            "frames_per_s": f"{req.frames_per_s:g}" if req.frames_per_s is not None else "25",
            # a real engine speaks the band's text; its frames are bounded (random weights never stop)
            "text": text,
            "frames": req.frames if req.frames is not None else frames_for_text(text),
            "seed": 0,  # request i draws with seed i: the same audio (SHA-256) run after run
        }
    if kind == "vla":
        return {
            "control_hz": f"{req.control_hz:g}",
            "steps": req.warmup + req.requests,  # the first `warmup` of them are warm-up requests
            "warmup": req.warmup,
            "slow_every": req.slow_every or None,
            "slow_ms": f"{req.slow_ms:g}" if req.slow_every else None,
            "hog": req.hog or None,
        }
    return {"seed": 0, "reps": req.requests}  # llama-bench: one repetition per measured request


def adapter_of(planned: planning.Planned) -> str:
    """The adapter that reads the plan's output; refused before anything starts when it has none."""
    p = planned.plan
    planning.check_artifacts(p)  # refused (with the remedy) before anything starts
    proc = p.processes[0]
    if proc.adapter not in (
        Adapter.EDGELAB_EVENTS,
        Adapter.LLAMA_SERVER,
        Adapter.LLAMA_BENCH,
        Adapter.LLAMA_TTS,
    ):
        raise Refusal(
            RefusalCode.NO_EXPORTED_GRAPH,
            f"{p.pipeline} on {p.runtime} ({proc.template}) has no bench adapter: "
            f"its output is read by {str(proc.adapter)!r}",
            device=p.device,
            strategy=p.strategy,
            remedy="bench with a runtime whose template emits edgelab events (reference) or serves "
            "llama-server (--runtime llama.cpp --strategy S3)",
        )
    return proc.adapter


def _set_meta(ctx: BenchContext, command: str) -> None:
    with session_scope(ctx.engine) as s:
        run = get_run(s, ctx.run_id)  # loaded to write its meta and command
        run.meta = dict(ctx.meta)
        prov = dict(run.provenance)
        prov["command"] = command  # store paths bound: exactly what ran
        run.provenance = prov
        run.command = command[:4000]
        s.add(run)


def fail_run(ctx: BenchContext, why: str) -> None:
    """The run ends ``failed`` before its workload started (refused, unreachable), saying why."""
    from edgelab.store.runs import set_state

    with session_scope(ctx.engine) as s:
        set_state(s, get_run(s, ctx.run_id), RunState.FAILED, error=why)
