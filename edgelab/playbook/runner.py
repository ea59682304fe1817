"""Run a playbook: devices (by name, class or tag) x pipelines, in parallel, steps in order.

Per job: steps run one after the other with their timeouts; the first failure skips the rest
unless the step says ``continue_on_error``; ``cleanup`` steps always run. Failures are
classified (infra / device / test). Every bench run is stored like any other run, so the
results outlive this process; the matrix is updated when the playbook asks for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from edgelab import __version__
from edgelab.errors import ConfigError, EdgelabError, PlayInterrupted, StepFailure
from edgelab.playbook.results import JobResult, PlayResult, StepResult, StepStatus
from edgelab.playbook.schema import Playbook, Step, substitute
from edgelab.playbook.steps import STEPS, JobContext, classify
from edgelab.store.db import session_scope

log = logging.getLogger(__name__)

OnStep = Callable[[JobResult, StepResult], None]


def select_devices(engine: Engine, selectors: list[str], limit: list[str] | None = None) -> list[Any]:
    """Device rows matched by ``name``, ``class:X``, ``tag:Y`` or ``all``; ``limit`` narrows by name.

    An unknown device name or a limit naming no selected device is a ConfigError (a typo must not
    pass as an empty, green run).
    """
    from edgelab.store.devices import get_device, list_devices

    with session_scope(engine, write=False) as s:
        every = list_devices(s)
        picked: dict[str, Any] = {}
        for sel in selectors:
            kind, _, value = sel.partition(":")
            if sel == "all":
                rows = every
            elif kind == "class" and value:
                rows = [d for d in every if d.device_class == value]
            elif kind == "tag" and value:
                rows = [d for d in every if value in (d.tags or [])]
            else:
                rows = [get_device(s, sel)]
            for d in rows:
                picked.setdefault(d.name, d)
    if limit:
        wanted = [n.strip() for n in limit if n.strip()]
        unknown = [n for n in wanted if n not in picked]
        if unknown:
            raise ConfigError(
                f"--limit names device(s) the playbook does not select: {', '.join(unknown)}",
                remedy=f"selected: {', '.join(sorted(picked)) or 'none'}",
            )
        picked = {n: picked[n] for n in wanted}
    return sorted(picked.values(), key=lambda d: d.name)


def plan_jobs(engine: Engine, pb: Playbook, limit: list[str] | None = None) -> list[JobResult]:
    """The jobs this playbook would run (device x pipeline), nothing touched."""
    devices = select_devices(engine, pb.devices, limit)
    if not devices:
        raise ConfigError(
            f"playbook {pb.name!r} selects no device",
            remedy="check devices: (names, class:X, tag:Y, all) against `edgelab device ls`",
        )
    pipelines: list[str | None] = list(pb.pipelines) or [None]
    return [
        JobResult(device=d.name, pipeline=p, virtual=bool(d.virtual), device_class=d.device_class)
        for d in devices
        for p in pipelines
    ]


def run_playbook(
    engine: Engine,
    pb: Playbook,
    *,
    limit: list[str] | None = None,
    variables: dict[str, Any] | None = None,
    out_dir: Path | None = None,
    on_step: OnStep | None = None,
    stop_event: threading.Event | None = None,
    lease_id: str | None = None,
    on_stop: Callable[[], None] | None = None,
    update_baseline: bool = False,
) -> PlayResult:
    """Run every job (in parallel up to ``pb.parallel``); returns the results, never raises per job.

    The whole play runs under a lease on every device it selects (the caller's ``lease_id`` /
    ``EDGELAB_LEASE``, or one of its own, renewed meanwhile); its deploy and bench steps run under
    it. A device under someone else's lease refuses the play (LeaseHeld) before any step runs.
    Ctrl-C: see ``_run_jobs`` (``on_stop`` is told of the first one).
    """
    from edgelab.deploy.reap import reap
    from edgelab.lease import held

    jobs = plan_jobs(engine, pb, limit)
    for device in sorted({j.device for j in jobs}):
        reap(engine, device)  # what a dead command (a killed play too) left there is finished first
    with held(engine, sorted({j.device for j in jobs}), f"play {pb.name}", lease_id=lease_id):
        return _run_jobs(engine, pb, jobs, variables, out_dir, on_step, stop_event, on_stop, update_baseline)


def _run_jobs(
    engine: Engine,
    pb: Playbook,
    jobs: list[JobResult],
    variables: dict[str, Any] | None,
    out_dir: Path | None,
    on_step: OnStep | None,
    stop_event: threading.Event | None,
    on_stop: Callable[[], None] | None = None,
    update_baseline: bool = False,
) -> PlayResult:
    """Jobs in threads; this (main) thread waits and takes the Ctrl-Cs.

    The first Ctrl-C sets ``stop_event``: each job's current step ends now (a soak stops, a push
    stops sending, a starting deploy or a bench is stopped), is marked ``interrupted``, the rest are
    skipped and the cleanup steps run. A second one cuts the cleanup short: every deployment of
    the play still running is marked ``to_stop`` (the next command that reaches its device, or
    ``edgelab stop``, stops it), and PlayInterrupted carries the result so far.
    """
    start = time.monotonic()
    merged = {**pb.vars, **(variables or {})}
    lock = threading.Lock()
    stop_event = stop_event or threading.Event()
    cleanup_cut = threading.Event()
    contexts: list[JobContext] = []
    finished: set[int] = set()  # jobs whose steps and cleanup all ran

    def report(job: JobResult, step: StepResult) -> None:
        if on_step is not None:
            with lock:
                on_step(job, step)

    def one(job: JobResult) -> JobResult:
        ctx = JobContext(
            engine=engine,
            device=job.device,
            pipeline=job.pipeline,
            result=job,
            playbook=pb.name,
            out_dir=out_dir,
            stop_event=stop_event,
            variables={
                **merged,
                "device": job.device,
                "device_class": job.device_class or "",
                "pipeline": job.pipeline or "",
                "playbook": pb.name,
            },
        )
        with lock:
            contexts.append(ctx)
        t0 = time.monotonic()
        try:
            failed = False
            for step in pb.steps:
                if failed or stop_event.is_set():
                    res = StepResult(
                        step.name,
                        step.kind,
                        status=StepStatus.SKIPPED,
                        message="skipped: an earlier step failed"
                        if failed
                        else "skipped: the play was stopped",
                    )
                    if not failed and not any(r.status == StepStatus.INTERRUPTED for r in job.steps):
                        # the Ctrl-C came between two steps: the one it kept from running says so,
                        # so the report (and its JUnit) always carries the interruption
                        res.status, res.message = (
                            StepStatus.INTERRUPTED,
                            "interrupted (Ctrl-C) before it started",
                        )
                    job.steps.append(res)
                    report(job, res)
                    continue
                res = _run_step(ctx, step)
                if (
                    stop_event.is_set() and res.status != StepStatus.SKIPPED
                ):  # it ran when the play was stopped
                    res.status, res.category = StepStatus.INTERRUPTED, None
                    res.message = "interrupted (Ctrl-C)" + (f": {res.message}" if res.message else "")
                job.steps.append(res)
                report(job, res)
                if res.status == StepStatus.FAILED and not step.continue_on_error:
                    failed = True
            ctx.stop_event = cleanup_cut  # cleanup runs after a Ctrl-C too; only a second one ends it
            for step in pb.cleanup:
                if cleanup_cut.is_set():
                    res = StepResult(
                        step.name,
                        step.kind,
                        status=StepStatus.SKIPPED,
                        message="skipped: cleanup cut short by a second Ctrl-C",
                    )
                else:
                    res = _run_step(ctx, step)
                res.cleanup = True
                job.steps.append(res)
                report(job, res)
            if pb.matrix_update and not stop_event.is_set():  # an interrupted play qualifies nothing
                _update_matrix(engine, pb, ctx)
            if update_baseline and job.ok and not stop_event.is_set():
                _update_baselines(engine, pb, job)
        finally:
            ctx.close()
            job.duration_s = time.monotonic() - t0
            finished.add(id(job))
        return job

    def result(**extra: Any) -> PlayResult:
        return PlayResult(
            playbook=pb.name,
            file=pb.file,
            jobs=jobs,
            edgelab_version=__version__,
            variables=merged,
            duration_s=time.monotonic() - start,
            **extra,
        )

    # A device's jobs run one after another (its memory is one ledger: two benches of one play
    # on a small device would refuse each other); ``parallel`` applies across devices.
    groups: dict[str, list[JobResult]] = {}
    for job in jobs:
        groups.setdefault(job.device, []).append(job)

    def in_turn(group: list[JobResult]) -> list[JobResult]:
        return [one(job) for job in group]

    pool = ThreadPoolExecutor(max_workers=max(1, min(pb.parallel, len(groups))), thread_name_prefix="play")
    by_group = {device: pool.submit(in_turn, group) for device, group in groups.items()}
    interrupts = 0
    try:
        while True:
            try:
                for f in by_group.values():
                    f.result()
                break
            except KeyboardInterrupt:
                interrupts += 1
                if interrupts > 1:
                    raise
                stop_event.set()  # first Ctrl-C: the current steps end, then each job's cleanup runs
                if on_stop is not None:
                    on_stop()
    except KeyboardInterrupt:
        cleanup_cut.set()
        left = _leave_for_later(engine, contexts)
        for job in jobs:
            if id(job) not in finished:
                job.steps.append(
                    StepResult(
                        "cleanup",
                        "cleanup",
                        status=StepStatus.INTERRUPTED,
                        cleanup=True,
                        message="a second Ctrl-C cut the job short; left for the next "
                        "command: " + ("; ".join(left) or "nothing recorded"),
                    )
                )
        pool.shutdown(wait=False, cancel_futures=True)
        raise PlayInterrupted(result(interrupted=True, cleanup_left=left)) from None
    pool.shutdown(wait=True)
    return result(interrupted=stop_event.is_set())


def _leave_for_later(engine: Engine, contexts: list[JobContext]) -> list[str]:
    """Mark every still-active deployment of the play ``to_stop``; returns what is left, said."""
    from edgelab.deploy.transition import transition
    from edgelab.store.deployments import ACTIVE_STATES, Deployment

    left = []
    for ctx in contexts:
        for dep_id in list(ctx.deployments):
            try:
                dep = transition(
                    engine, dep_id, edit=lambda s, d: setattr(d, "to_stop", d.state in ACTIVE_STATES)
                )
            except Exception:  # noqa: BLE001 - recording what is left must not stop the others
                log.debug("deployment %s: could not mark it to stop", dep_id, exc_info=True)
                continue
            if isinstance(dep, Deployment) and dep.to_stop:
                left.append(f"run {dep.run_id} on {dep.device_name} (`edgelab stop {dep.run_id}`)")
    return left + _benches_in_flight(engine)


def _benches_in_flight(engine: Engine) -> list[str]:
    """This process's bench runs still open (their workload and memory reservation): once it has
    exited, the next command that looks (``edgelab ps``) stops them and releases the memory."""
    import os

    from sqlmodel import col, select

    from edgelab.states import RunState
    from edgelab.store.db import session_scope
    from edgelab.store.runs import Run

    try:
        with session_scope(engine, write=False) as s:
            runs = s.exec(
                select(Run).where(
                    Run.kind == "bench",
                    col(Run.state).in_((RunState.PENDING, RunState.RUNNING)),
                    Run.owner_pid == os.getpid(),
                )
            ).all()
            return [
                f"bench run {r.id} on {r.device_name} (its workload and memory: `edgelab ps` ends them)"
                for r in runs
            ]
    except Exception:  # noqa: BLE001 - saying what is left must not fail the exit
        return []


def _run_step(ctx: JobContext, step: Step) -> StepResult:
    res = StepResult(step.name, step.kind)
    t0 = time.monotonic()
    deadline = None if step.timeout_s is None else t0 + step.timeout_s
    try:
        opts = substitute(step.options, ctx.variables)
        STEPS[step.kind](ctx, step, opts, deadline, res)
        if res.status == StepStatus.PENDING:
            res.status = StepStatus.PASSED
        if deadline is not None and time.monotonic() > deadline and res.status == StepStatus.PASSED:
            res.status, res.category = StepStatus.FAILED, "infra"
            res.message = f"passed its timeout of {step.timeout_s:g} s ({res.message})"
    except StepFailure as err:
        res.status, res.category, res.message = StepStatus.FAILED, err.category, str(err)
        res.details.update(err.details)
    except EdgelabError as err:
        res.status, res.category = StepStatus.FAILED, classify(err)
        res.message = str(err) + (f" (-> {err.remedy})" if err.remedy else "")
    except Exception as err:  # noqa: BLE001 - one job's surprise must not stop the others
        res.status, res.category, res.message = StepStatus.FAILED, "infra", f"{type(err).__name__}: {err}"
    res.duration_s = time.monotonic() - t0
    log.info(
        "play %s: step %s (%s) %s in %.2fs%s",
        ctx.result.label,
        step.name,
        step.kind,
        res.status,
        res.duration_s,
        f" [{res.category}] {res.message}" if res.status == StepStatus.FAILED else "",
    )
    return res


def _update_baselines(engine: Engine, pb: Playbook, job: JobResult) -> None:
    """A passed job's gated runs become its gate steps' baselines (one new row each: history kept)."""
    from edgelab.lease.owner import whoami
    from edgelab.metrics.baseline import set_baseline

    for step in job.steps:
        name = step.details.get("baseline_name") if step.kind == "gate" else None
        if not name or not step.run_id or step.status != StepStatus.PASSED:
            continue
        with session_scope(engine) as s:
            row = set_baseline(
                s, name, [step.run_id], set_by=f"{whoami().label()} (play {pb.name})", note=f"play {pb.file}"
            )
        job.baselines.append(f"{name} of {row.pipeline} on {row.device} is now {step.run_id}")


def _row_key(engine: Engine, ctx: JobContext) -> str | None:
    """The matrix row of this device: its catalog entry (from the latest probe) when it has one."""
    entry = ctx.result.catalog_entry
    if entry is None:
        from edgelab.errors import NotFound
        from edgelab.store.snapshots import latest_snapshot

        try:
            with session_scope(engine, write=False) as s:
                entry = latest_snapshot(s, ctx.device).catalog_entry
        except NotFound:
            return None
    return entry


def _update_matrix(engine: Engine, pb: Playbook, ctx: JobContext) -> None:
    from edgelab.matrix.cells import record_outcome
    from edgelab.matrix.layout import row_by

    row_key = _row_key(engine, ctx)
    job = ctx.result
    if row_key is None or row_by(row_key) is None:
        job.matrix.append(f"{job.device}: no matrix row ({row_key or 'not probed'})")
        return
    by_pipeline: dict[str, list[StepResult]] = {}
    for s in job.steps:
        if s.kind == "bench" and s.run_id and s.details.get("pipeline"):
            by_pipeline.setdefault(s.details["pipeline"], []).append(s)
    for pipeline, benches in by_pipeline.items():
        gates = [s for s in job.steps if s.kind == "gate" and s.run_id in {b.run_id for b in benches}]
        failed = [s for s in [*benches, *gates] if s.status == StepStatus.FAILED]
        with session_scope(engine) as s:
            note = record_outcome(
                s,
                row_key=row_key,
                pipeline=pipeline,
                run_ids=[b.run_id for b in benches],
                passed=not failed,
                gated=bool(gates),
                source=f"play:{pb.name}"[:64],
                qualify=pb.matrix_qualify,
                failing_layer=(
                    "performance" if failed and failed[0].kind == "gate" else "runtime" if failed else None
                ),
                reason=failed[0].message[:500] if failed else None,
            )
        job.matrix.append(note)
