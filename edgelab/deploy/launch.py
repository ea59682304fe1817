"""Deploy: the launch pipeline's deploy composition (plan, record, admit, connect, push, start, ready).

Every state change goes to the database first (through :func:`edgelab.deploy.transition.transition`),
so another process can see and stop a deployment. Anything that interrupts a deploy (Ctrl-C, a
failed readiness, a lost connection) stops what was started, releases the reservation and leaves
the run in a final state with its phases and logs: each step undoes its own part
(:mod:`edgelab.deploy.pipeline`).

A UI that shows progress iterates :func:`deploy_steps` (``PhaseEvent`` s); :func:`deploy` runs
it to the end and returns the deployment.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from edgelab.credentials import SecretURL, mask_text
from edgelab.deploy import admission, placement, ready, remote, start
from edgelab.deploy import artifacts as plan_artifacts
from edgelab.deploy.options import Options, connect, unreachable
from edgelab.deploy.pipeline import (
    Launch,
    LaunchContext,
    PhaseEvent,
    Step,
    check_cancel,
    under_lease,
)
from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.planning import DeployRequest, check_artifacts, plan
from edgelab.deploy.record import record_run
from edgelab.deploy.transition import transition
from edgelab.errors import EdgelabError, Interrupted, Refusal, RefusalCode, TransportError
from edgelab.identity import identity
from edgelab.logs import swallowed
from edgelab.runtimes.spec import PlacementSource, ReadyKind
from edgelab.store.db import session_scope
from edgelab.store.deployments import (
    AttemptOutcome,
    DeployAttempt,
    Deployment,
    DeploymentProcess,
    DeploymentState,
    ProcessState,
    add_phase,
    get_deployment,
    processes,
    record_attempt,
)
from edgelab.store.devices import get_device
from edgelab.store.models import utcnow
from edgelab.transport import Transport
from edgelab.transport.host import host_of

if TYPE_CHECKING:
    from edgelab.deploy.supervise import Follow

log = logging.getLogger(__name__)

POLL_S = 0.5


def deploy(
    engine: Engine,
    req: DeployRequest,
    *,
    opts: Options | None = None,
    lease_id: str | None = None,
    follow: Follow | None = None,
) -> Deployment:
    """Plan, admit, push, launch and wait until ready; returns the running deployment.

    Runs under a lease on the device (the caller's ``lease_id`` / ``EDGELAB_LEASE``, the holder's
    own, or one of its own), renewed while it starts; the running deployment keeps that lease
    until it is stopped. Raises LeaseHeld when someone else holds the device, and Refusal before
    anything is pushed or launched when the plan cannot run here.

    ``follow``: the running deployment's follower (``edgelab.deploy.supervise.Follow``: DETACHED,
    THREAD or NONE); None leaves it to the caller (a test, a bench that measures it itself).
    """
    with deploy_steps(engine, req, opts=opts, lease_id=lease_id, follow=follow) as steps:
        return steps.run()


def deploy_steps(
    engine: Engine,
    req: DeployRequest,
    *,
    opts: Options | None = None,
    lease_id: str | None = None,
    follow: Follow | None = None,
) -> Launch[Deployment]:
    """:func:`deploy` as it goes: iterate it (inside ``with``) for its phases; ``.result`` is the
    running deployment once the iteration ends (and its follower started, as ``follow`` says)."""
    return Launch(_deploy(engine, req, opts, lease_id, follow))


def _deploy(
    engine: Engine, req: DeployRequest, opts: Options | None, lease_id: str | None, follow: Follow | None
) -> Generator[PhaseEvent, None, Deployment]:
    ctx = yield from under_lease(
        engine,
        DEPLOY,
        partial(DeployContext, request=req),
        device=req.device,
        what=f"deploy {req.pipeline}",
        log=log,
        opts=opts,
        lease_id=lease_id,
    )
    dep: Deployment = ctx.result
    if follow is not None and dep.run_id:
        from edgelab.deploy.supervise import follow_run

        follow_run(engine, dep.run_id, follow, transport=(opts or Options()).transport)
    return dep


@dataclass
class DeployContext(LaunchContext):
    """The launch context and what only a deploy holds: its request, its deployment row (id and
    the open transaction that records it with its admission), the cleanup's findings."""

    request: DeployRequest = None  # type: ignore[assignment]
    deployment: Deployment | None = None
    deployment_id: int | None = None  # set once admitted (committed): from here on, undo ends it
    device: Any = None  # the device's row, inside the record-and-admit transaction
    tx: ExitStack | None = None  # record and admission commit together
    session: Any = None  # that transaction's session (sqlmodel.Session) while it is open
    t0: float = 0.0  # the connect's start: the ready phase counts from it
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)  # only in this process's memory
    left: int = 0  # processes seen left by the cleanup (-1: the device could not be reached)
    logs: dict[str, str] = field(default_factory=dict)
    cleanup_note: str = ""

    def end_tx(self, exc: BaseException | None) -> None:
        """Commit (``exc`` None) or roll back the record-and-admit transaction, once."""
        tx, self.tx, self.session = self.tx, None, None
        if tx is None:
            return
        if exc is None:
            tx.close()
        else:
            tx.__exit__(type(exc), exc, exc.__traceback__)


def _attempt(
    engine: Engine, req: DeployRequest, refusal: Refusal | None, deployment_id: int | None = None
) -> None:
    with session_scope(engine) as s:
        record_attempt(
            s,
            DeployAttempt(
                device_name=req.device,
                pipeline=req.pipeline,
                strategy=req.strategy,
                runtime=req.runtime,
                outcome=AttemptOutcome.REFUSED if refusal else AttemptOutcome.ADMITTED,
                code=refusal.code if refusal else None,
                pool=refusal.pool if refusal else None,
                message=refusal.detail if refusal else None,
                remedy=refusal.remedy if refusal else None,
                numbers=refusal.numbers if refusal else {},
                deployment_id=deployment_id,
            ),
        )


class Plan(Step):
    """The plan and the checks that refuse it before anything is reserved (a refusal is recorded)."""

    def run(self, ctx: DeployContext) -> Iterator[PhaseEvent]:
        req = ctx.request
        try:
            planned = ctx.planned = plan(ctx.engine, req, run_id=ctx.run_id)
            ctx.phases("planned", strategy=planned.plan.strategy, runtime=planned.plan.runtime)
            if planned.refusal:
                raise planned.refusal
            check_artifacts(planned.plan)
            said = _check_s4_server(planned.plan, req.endpoint)
        except Refusal as r:
            _attempt(ctx.engine, req, r)
            raise
        if said is not None:
            yield PhaseEvent("server", {"checked": said})
        p = planned.plan
        ctx.secrets = {
            proc.name: req.endpoint.device_env()
            for proc in p.processes
            if req.endpoint is not None
            and req.endpoint.has_secret
            and proc.values.get("server") == str(req.endpoint)
        }


class Record(Step):
    """The run (with its provenance) and its deployment row, in the transaction Admit commits."""

    def run(self, ctx: DeployContext) -> Iterator[PhaseEvent]:
        planned, p, opts = ctx.planned, ctx.plan, ctx.opts
        ctx.tx = ExitStack()
        try:
            s = ctx.session = ctx.tx.enter_context(session_scope(ctx.engine))
            device = ctx.device = get_device(s, ctx.request.device)
            ctx.endpoint, ctx.device_id, ctx.device_name = device.endpoint(), device.pk, device.name
            # once: the provenance, the run and the deployment keep the same plan
            planned_dict = ctx.plan_dict = p.to_dict()
            command = " ".join(" ".join(pr.argv) for pr in p.processes)[:4000]
            record_run(
                s,
                planned,
                run_id=ctx.run_id,
                kind="deploy",
                source="deploy",
                device=device.name,
                virtual=planned.virtual,
                command=command,
                plan=planned_dict,
                meta={"plan": planned_dict, **({"ephemeral": True} if opts.ephemeral else {})},
                play=opts.play,
            )
            dep = ctx.deployment = Deployment(
                run_id=ctx.run_id,
                device_id=device.pk,
                device_name=device.name,
                pipeline=p.pipeline,
                strategy=p.strategy,
                runtime=p.runtime,
                state=DeploymentState.PENDING,
                plan=planned_dict,
                facts_hash=planned.facts_hash,
                virtual=planned.virtual,
                remote_dir=p.remote_dir,
                owner=identity().user_at_host[:64],
                lease_id=ctx.lease_id,
            )
            s.add(dep)
            s.flush()
        except Refusal as r:
            ctx.end_tx(r)
            _attempt(ctx.engine, ctx.request, r)
            raise
        return iter(())

    def undo(self, ctx: DeployContext, exc: BaseException) -> None:
        ctx.end_tx(exc)  # not admitted: nothing of it stays


class Admit(Step):
    """Check and reserve every pool in the record's transaction, commit, record the admission.
    From here on anything that interrupts ends the deployment (a SIGKILL: the next command reaps)."""

    def run(self, ctx: DeployContext) -> Iterator[PhaseEvent]:
        dep = ctx.deployment
        assert dep is not None and ctx.tx is not None
        try:
            s = ctx.session
            lines = admission.admit(s, ctx.device, ctx.planned.profile, ctx.plan, dep, lease_id=ctx.lease_id)
            dep.admission = {"pools": [line.to_dict() for line in lines]}
            add_phase(dep, "admitted")
            s.add(dep)
        except BaseException as e:
            ctx.end_tx(e)
            if isinstance(e, Refusal):
                _attempt(ctx.engine, ctx.request, e)
            raise
        ctx.end_tx(None)
        ctx.deployment_id = dep.pk
        _attempt(ctx.engine, ctx.request, None, dep.id)
        p = ctx.plan
        yield PhaseEvent("admitted", {"run": ctx.run_id, "strategy": p.strategy, "runtime": p.runtime})

    def undo(self, ctx: DeployContext, exc: BaseException) -> None:
        """Whatever stopped the deploy: end the deployment (Ctrl-C: stopped), its processes as the
        cleanup found them; the final state releases the reservation."""
        if ctx.deployment_id is None:
            return
        stopped = isinstance(exc, KeyboardInterrupt | Interrupted | GeneratorExit)
        state = DeploymentState.STOPPED if stopped else DeploymentState.FAILED
        if isinstance(exc, KeyboardInterrupt):
            why = "interrupted (SIGINT) during deploy"
        elif isinstance(exc, GeneratorExit):
            why = "deploy abandoned by its caller"
        else:
            why = str(exc) or type(exc).__name__
        why += ctx.cleanup_note
        left_total, logs = ctx.left, ctx.logs

        def final(s, d: Deployment) -> None:
            for row in processes(s, d.pk):
                row.state = ProcessState.KILLED if left_total == 0 else ProcessState.UNKNOWN
                row.stopped_at = utcnow()
                s.add(row)
            d.error = why[:2000]
            d.logs = logs
            d.to_stop = left_total != 0  # not seen gone: memory held until a stop sees them gone

        transition(
            ctx.engine,
            ctx.deployment_id,
            state if left_total >= 0 else DeploymentState.DEVICE_LOST,
            phase="aborted",
            edit=final,
            why=why[:300],
            left=left_total,
        )


class Connect(Step):
    """The device's transport and the run's folder on it: the deployment is ``starting``."""

    def run(self, ctx: DeployContext) -> Iterator[PhaseEvent]:
        assert ctx.deployment_id is not None
        ctx.t0 = time.monotonic()
        t = ctx.connect()
        try:
            root = remote.run_root(t)
        except TransportError as e:
            raise unreachable(e, ctx.plan.device) from e
        ctx.run_dir = f"{root}/{ctx.run_id}"
        _advance(
            ctx.engine,
            ctx.deployment_id,
            DeploymentState.STARTING,
            phase="connected",
            values={"remote_dir": ctx.run_dir},
            seconds=round(time.monotonic() - ctx.t0, 3),
        )
        yield PhaseEvent("connected", {"remote_dir": ctx.run_dir})
        check_cancel(ctx.opts)

    def close(self, ctx: DeployContext) -> None:
        if ctx.transport is not None:
            with swallowed(log, "closing the device connection"):
                ctx.transport.close()


class Push(Step):
    """The plan's artifacts into the device's store (what is there already is not sent again)."""

    def run(self, ctx: DeployContext) -> Iterator[PhaseEvent]:
        assert ctx.transport is not None and ctx.device_id is not None and ctx.deployment_id is not None
        p = ctx.plan
        ctx.blob_paths, ctx.pushed = plan_artifacts.push(ctx.engine, ctx.transport, ctx.device_id, p)
        transition(
            ctx.engine, ctx.deployment_id, phase="pushed", artifacts=len(p.artifacts), blobs=ctx.pushed
        )
        yield PhaseEvent("pushed", {"blobs": ctx.pushed})
        check_cancel(ctx.opts)


class Start(Step):
    """Each process started detached in its own folder, its row and pid recorded."""

    def run(self, ctx: DeployContext) -> Iterator[PhaseEvent]:
        t, p, dep_id = ctx.transport, ctx.plan, ctx.deployment_id
        assert t is not None and dep_id is not None and ctx.run_dir is not None
        for proc in p.processes:
            if proc.port and host_of(t).checks_ports and ready.listening(t, proc.port):
                # another server answering on the port would pass this one's readiness check
                raise EdgelabError(
                    f"port {proc.port} is already in use on {p.device}",
                    remedy="stop what listens there (`edgelab ps`), or deploy again",
                )
            wd = f"{ctx.run_dir}/{proc.name}"
            ctx.workdirs[proc.name] = wd
            ts = time.monotonic()
            started = start.start(t, proc, wd, ctx.blob_paths, ctx.secrets.get(proc.name))
            pid = ctx.pids[proc.name] = started.pid
            with session_scope(ctx.engine) as s:
                s.add(
                    DeploymentProcess(
                        deployment_id=dep_id,
                        name=proc.name,
                        argv=started.argv,
                        workdir=wd,
                        pid=pid,
                        state=ProcessState.RUNNING,
                        started_at=utcnow(),
                    )
                )
                dep = get_deployment(s, dep_id)  # loaded to write its phase
                add_phase(dep, f"spawned:{proc.name}", pid=pid, seconds=round(time.monotonic() - ts, 3))
                s.add(dep)
            yield PhaseEvent("spawned", {"process": proc.name, "pid": pid})
            check_cancel(ctx.opts)

    def undo(self, ctx: DeployContext, exc: BaseException) -> None:
        """Stop what was started (pids from the pid files), keep its logs; what is left is counted."""
        if not ctx.workdirs:
            return
        assert ctx.endpoint is not None
        try:
            t = ctx.transport or connect(ctx.endpoint, ctx.opts)
            for _name, wd in ctx.workdirs.items():
                pid = remote.pid_from_file(t, wd)
                if pid:
                    ctx.left += remote.stop(t, pid, ctx.opts.stop_grace_s)
            ctx.logs = remote.fetch_logs(t, ctx.workdirs)
        except (EdgelabError, OSError) as e:
            ctx.cleanup_note = f"; cleanup could not reach the device: {e}"
            ctx.left = -1


class Ready(Step):
    """Until every process's readiness holds; then its placement as observed: ``running``."""

    def run(self, ctx: DeployContext) -> Iterator[PhaseEvent]:
        t, p, dep_id = ctx.transport, ctx.plan, ctx.deployment_id
        assert t is not None and dep_id is not None
        timeout = ctx.opts.ready_timeout_s or p.ready_timeout_s
        lines = yield from _wait_ready(t, p, ctx.workdirs, ctx.pids, timeout, ctx.opts)
        for proc in p.processes:  # runtimes log their load (and placement) on stderr
            if proc.placement == PlacementSource.LLAMA_LOAD_LOG:
                lines[proc.name] = (
                    lines[proc.name]
                    + remote.read_file(
                        t, f"{ctx.workdirs[proc.name]}/stderr.log", remote.LOG_TAIL_BYTES
                    ).splitlines()
                )
        obs = placement.observe(p, lines)
        ctx.result = _advance(
            ctx.engine,
            dep_id,
            DeploymentState.RUNNING,
            phase="ready",
            values={"placement": obs},
            seconds=round(time.monotonic() - ctx.t0, 3),
        )
        yield PhaseEvent("ready", {"placement": obs})


DEPLOY: tuple[Step, ...] = (Plan(), Record(), Admit(), Connect(), Push(), Start(), Ready())


def _check_s4_server(p: ExecutionPlan, endpoint: SecretURL | None = None) -> str | None:
    """S4's device stage needs its server: refused, with the address and the remedy, unless the
    server answers the protocol (edgelab.protocols.check) before anything is reserved or started;
    what it said, masked (None: not S4).

    The plan holds the masked address; the check, a lab-side client, connects with the whole URL
    (``endpoint.reveal()``, in memory only) and everything it says is masked again."""
    if p.strategy != "S4" or not p.endpoints:
        return None
    from edgelab.protocols.check import check_server

    url = p.endpoints[0]
    full = endpoint.reveal() if endpoint is not None and endpoint.shown == url else url
    try:
        said = check_server(full, kind="tts" if "audio" in p.expected_outputs else "other")
    except TransportError as e:
        raise Refusal(
            RefusalCode.ENDPOINT_UNREACHABLE,
            mask_text(f"S4 server {url} does not answer: {e}"),
            device=p.device,
            strategy="S4",
            remedy="start the server first (the lab's reference talker: `python -m edgelab.protocols serve "
            "speech --port PORT`, then --endpoint ws://127.0.0.1:PORT; or a vLLM-Omni server), or fix --endpoint",
        ) from None  # its cause's text (and a --debug traceback) may hold the whole URL
    return mask_text(said)


def _advance(engine: Engine, dep_id: int, to: str, **kw: Any) -> Deployment:
    """One step forward; a deployment another command already ended is not started further."""
    dep = transition(engine, dep_id, to, **kw)
    if dep.state != to:
        raise EdgelabError(
            f"run {dep.run_id} is {dep.state}: another command ended it while it started",
            remedy="see `edgelab ps --all`; deploy again if it is still wanted",
        )
    return dep


def _wait_ready(
    t: Transport,
    p: ExecutionPlan,
    workdirs: dict[str, str],
    pids: dict[str, int],
    timeout: float,
    opts: Options | None = None,
) -> Generator[PhaseEvent, None, dict[str, list[str]]]:
    """Poll each process until its template's readiness holds (log line, HTTP 200, port, alive);
    yields each process's ``ready_line``, returns what each printed."""
    deadline = time.monotonic() + timeout
    lines: dict[str, list[str]] = {proc.name: [] for proc in p.processes}
    offsets = dict.fromkeys(lines, 0)
    pending = {proc.name: proc for proc in p.processes}
    while pending:
        for name, proc in list(pending.items()):
            got = remote.poll(t, workdirs[name], pids[name], offsets[name])
            offsets[name] += len(got.text.encode())
            new = got.text.splitlines()
            lines[name].extend(new)
            kind = proc.ready_kind
            if kind == ReadyKind.LOG:
                ok = ready.matches(proc.ready_pattern or proc.ready.get("pattern"), new)
            elif kind == ReadyKind.HTTP:
                ok = got.alive and ready.http_ok(
                    t, int(proc.ready["port"]), str(proc.ready.get("path") or "/")
                )
            elif kind == ReadyKind.PORT:
                ok = got.alive and ready.listening(t, int(proc.ready["port"]))
            else:  # alive, or a one-shot program that already finished cleanly
                ok = got.alive or got.exit_code == 0
            if ok:
                del pending[name]
                yield PhaseEvent("ready_line", {"process": name, "check": kind})
                continue
            if not got.alive:
                err = remote.read_file(t, f"{workdirs[name]}/stderr.log", 2000).strip().splitlines()
                raise EdgelabError(
                    f"{name} exited (code {got.exit_code}) before it was ready"
                    + (f": {err[-1]}" if err else ""),
                    remedy=f"see `edgelab logs` of the run; command: {' '.join(proc.argv)[:200]}",
                )
        if not pending:
            break
        if opts is not None:
            check_cancel(opts)
        if time.monotonic() > deadline:
            raise EdgelabError(
                f"{', '.join(pending)} not ready after {timeout:g}s (from the profile's load-time estimate)",
                remedy="see `edgelab logs`; a cold start can be slow (S1: 95-355 s): "
                "give more with --ready-timeout SECONDS",
            )
        time.sleep(POLL_S)
    return lines
