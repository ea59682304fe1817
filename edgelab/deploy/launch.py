"""Deploy launch: admit, push, start detached, wait until ready; anything that interrupts it cleans up.

Every state change goes to the database first (through :func:`edgelab.deploy.transition.transition`),
so another process can see and stop a deployment. Anything that interrupts a deploy (Ctrl-C, a
failed readiness, a lost connection) stops what was started, releases the reservation and leaves
the run in a final state with its phases and logs.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from edgelab.credentials import SecretURL, mask_text
from edgelab.deploy import admission, placement, ready, remote, start
from edgelab.deploy import artifacts as plan_artifacts
from edgelab.deploy.options import Options, connect, connect_device, unreachable
from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.planning import DeployRequest, check_artifacts, plan
from edgelab.deploy.record import record_run
from edgelab.deploy.transition import transition
from edgelab.errors import EdgelabError, Interrupted, Refusal, RefusalCode, TransportError
from edgelab.identity import identity
from edgelab.logs import Phases, swallowed
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
from edgelab.store.runs import new_run_id
from edgelab.transport import Transport
from edgelab.transport.base import Endpoint
from edgelab.transport.host import host_of

if TYPE_CHECKING:
    from edgelab.deploy.supervise import Follow

log = logging.getLogger(__name__)

POLL_S = 0.5

Phase = Callable[[str, dict[str, Any]], None]


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


def deploy(
    engine: Engine,
    req: DeployRequest,
    *,
    opts: Options | None = None,
    on_phase: Phase | None = None,
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
    from edgelab.deploy.reap import reap
    from edgelab.lease import held

    reap(engine, req.device, opts=opts)  # what a dead command left on this device is finished first
    with held(engine, [req.device], f"deploy {req.pipeline}", lease_id=lease_id) as use:
        dep = _deploy(engine, req, opts or Options(), on_phase, use.lease_for(req.device))
    if follow is not None and dep.run_id:
        from edgelab.deploy.supervise import follow_run

        follow_run(engine, dep.run_id, follow, transport=(opts or Options()).transport)
    return dep


def _deploy(
    engine: Engine, req: DeployRequest, opts: Options, on_phase: Phase | None, lease_id: str | None
) -> Deployment:
    run_id = new_run_id()
    logged = on_phase = _Logged(on_phase, f"deploy {req.pipeline} on {req.device} {run_id}")
    try:
        planned = plan(engine, req, run_id=run_id)
        logged.phases("planned", strategy=planned.plan.strategy, runtime=planned.plan.runtime)
        if planned.refusal:
            raise planned.refusal
        check_artifacts(planned.plan)
        _check_s4_server(planned.plan, on_phase, req.endpoint)
    except Refusal as r:
        _attempt(engine, req, r)
        raise
    p = planned.plan
    try:
        with session_scope(engine) as s:
            device = get_device(s, req.device)
            endpoint, device_id = device.endpoint(), device.pk
            planned_dict = p.to_dict()  # once: the provenance, the run and the deployment keep the same plan
            command = " ".join(" ".join(pr.argv) for pr in p.processes)[:4000]
            record_run(
                s,
                planned,
                run_id=run_id,
                kind="deploy",
                source="deploy",
                device=device.name,
                virtual=planned.virtual,
                command=command,
                plan=planned_dict,
                meta={"plan": planned_dict, **({"ephemeral": True} if opts.ephemeral else {})},
                play=opts.play,
            )
            dep = Deployment(
                run_id=run_id,
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
                lease_id=lease_id,
            )
            s.add(dep)
            s.flush()
            lines = admission.admit(s, device, planned.profile, p, dep, lease_id=lease_id)
            dep.admission = {"pools": [line.to_dict() for line in lines]}
            add_phase(dep, "admitted")
            s.add(dep)
    except Refusal as r:
        _attempt(engine, req, r)
        raise
    try:  # admitted: from here on anything that interrupts cleans up (a SIGKILL: the next command reaps)
        _attempt(engine, req, None, dep.id)
        _phase(on_phase, "admitted", {"run": run_id, "strategy": p.strategy, "runtime": p.runtime})
    except BaseException as exc:
        _interrupted(engine, dep.pk, None, {}, exc, opts)
        raise
    secrets = {
        proc.name: req.endpoint.device_env()
        for proc in p.processes
        if req.endpoint is not None
        and req.endpoint.has_secret
        and proc.values.get("server") == str(req.endpoint)
    }
    return _launch(
        engine,
        dep.pk,
        p,
        opts,
        on_phase,
        secrets,
        run_id=run_id,
        device_id=device_id,
        endpoint=endpoint,
    )


def _check_s4_server(p: ExecutionPlan, on_phase: Phase | None, endpoint: SecretURL | None = None) -> None:
    """S4's device stage needs its server: refused, with the address and the remedy, unless the
    server answers the protocol (edgelab.protocols.check) before anything is reserved or started.

    The plan holds the masked address; the check, a lab-side client, connects with the whole URL
    (``endpoint.reveal()``, in memory only) and everything it says is masked again."""
    if p.strategy != "S4" or not p.endpoints:
        return
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
    _phase(on_phase, "server", {"checked": mask_text(said)})


class _Logged:
    """The caller's phase callback, each phase also logged once with its duration (``edgelab.logs.Phases``)."""

    def __init__(self, cb: Phase | None, what: str):
        self.cb, self.phases = cb, Phases(log, what)

    def __call__(self, name: str, info: dict[str, Any]) -> None:
        self.phases(name, **{k: v for k, v in info.items() if k != "placement"})
        if self.cb:
            self.cb(name, info)


def _phase(cb: Phase | None, name: str, info: dict[str, Any]) -> None:
    if cb:
        cb(name, info)


def _check_cancel(opts: Options) -> None:
    """A caller's stop (a playbook's Ctrl-C) ends the deploy between two steps, like a SIGINT."""
    if opts.cancel is not None and opts.cancel.is_set():
        raise Interrupted("deploy stopped by its caller", remedy="deploy again when wanted")


def _advance(engine: Engine, dep_id: int, to: str, **kw: Any) -> Deployment:
    """One step forward; a deployment another command already ended is not started further."""
    dep = transition(engine, dep_id, to, **kw)
    if dep.state != to:
        raise EdgelabError(
            f"run {dep.run_id} is {dep.state}: another command ended it while it started",
            remedy="see `edgelab ps --all`; deploy again if it is still wanted",
        )
    return dep


@contextmanager
def _no_sigint() -> Iterator[None]:
    """Cleanup must finish: a second Ctrl-C waits until the group is gone and the pool released."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _interrupted(
    engine: Engine,
    dep_id: int,
    t: Transport | None,
    workdirs: dict[str, str],
    exc: BaseException,
    opts: Options,
) -> None:
    """Whatever stopped the deploy: stop what was started and end the deployment (Ctrl-C: stopped)."""
    with _no_sigint():
        stopped = isinstance(exc, KeyboardInterrupt | Interrupted)
        state = DeploymentState.STOPPED if stopped else DeploymentState.FAILED
        why = (
            "interrupted (SIGINT) during deploy"
            if isinstance(exc, KeyboardInterrupt)
            else (str(exc) or type(exc).__name__)
        )
        _abort(engine, dep_id, t, workdirs, state, why, opts)


def _launch(
    engine: Engine,
    dep_id: int,
    p: ExecutionPlan,
    opts: Options,
    on_phase: Phase | None,
    secrets: dict[str, dict[str, str]] | None = None,
    *,
    run_id: str,
    device_id: int,
    endpoint: Endpoint,
) -> Deployment:
    """Connect, push, start each process, wait until ready, with what ``_deploy`` already holds;
    ``secrets`` (per process, an endpoint's password for its environment) exist only in this call's memory."""
    t: Transport | None = None
    workdirs: dict[str, str] = {}
    pids: dict[str, int] = {}
    try:
        t0 = time.monotonic()
        t = connect_device(endpoint, opts, p.device)
        try:
            root = remote.run_root(t)
        except TransportError as e:
            raise unreachable(e, p.device) from e
        run_dir = f"{root}/{run_id}"
        _advance(
            engine,
            dep_id,
            DeploymentState.STARTING,
            phase="connected",
            values={"remote_dir": run_dir},
            seconds=round(time.monotonic() - t0, 3),
        )
        _phase(on_phase, "connected", {"remote_dir": run_dir})
        _check_cancel(opts)
        blob_paths, pushed = plan_artifacts.push(engine, t, device_id, p)
        transition(engine, dep_id, phase="pushed", artifacts=len(p.artifacts), blobs=pushed)
        _phase(on_phase, "pushed", {"blobs": pushed})
        _check_cancel(opts)
        for proc in p.processes:
            if proc.port and host_of(t).checks_ports and ready.listening(t, proc.port):
                # another server answering on the port would pass this one's readiness check
                raise EdgelabError(
                    f"port {proc.port} is already in use on {p.device}",
                    remedy="stop what listens there (`edgelab ps`), or deploy again",
                )
            wd = f"{run_dir}/{proc.name}"
            workdirs[proc.name] = wd
            ts = time.monotonic()
            started = start.start(t, proc, wd, blob_paths, (secrets or {}).get(proc.name))
            pid = pids[proc.name] = started.pid
            with session_scope(engine) as s:
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
                dep = get_deployment(s, dep_id)
                add_phase(dep, f"spawned:{proc.name}", pid=pid, seconds=round(time.monotonic() - ts, 3))
                s.add(dep)
            _phase(on_phase, "spawned", {"process": proc.name, "pid": pid})
            _check_cancel(opts)
        timeout = opts.ready_timeout_s or p.ready_timeout_s
        lines = _wait_ready(t, p, workdirs, pids, timeout, on_phase, opts)
        for proc in p.processes:  # runtimes log their load (and placement) on stderr
            if proc.placement == PlacementSource.LLAMA_LOAD_LOG:
                lines[proc.name] = (
                    lines[proc.name]
                    + remote.read_file(
                        t, f"{workdirs[proc.name]}/stderr.log", remote.LOG_TAIL_BYTES
                    ).splitlines()
                )
        obs = placement.observe(p, lines)

        dep = _advance(
            engine,
            dep_id,
            DeploymentState.RUNNING,
            phase="ready",
            values={"placement": obs},
            seconds=round(time.monotonic() - t0, 3),
        )
        _phase(on_phase, "ready", {"placement": obs})
        return dep
    except BaseException as exc:
        _interrupted(engine, dep_id, t, workdirs, exc, opts)
        raise
    finally:
        if t is not None:
            with swallowed(log, "closing the device connection"):
                t.close()


def _wait_ready(
    t: Transport,
    p: ExecutionPlan,
    workdirs: dict[str, str],
    pids: dict[str, int],
    timeout: float,
    on_phase: Phase | None,
    opts: Options | None = None,
) -> dict[str, list[str]]:
    """Poll each process until its template's readiness holds (log line, HTTP 200, port, alive)."""
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
                _phase(on_phase, "ready_line", {"process": name, "check": kind})
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
            _check_cancel(opts)
        if time.monotonic() > deadline:
            raise EdgelabError(
                f"{', '.join(pending)} not ready after {timeout:g}s (from the profile's load-time estimate)",
                remedy="see `edgelab logs`; a cold start can be slow (S1: 95-355 s): "
                "give more with --ready-timeout SECONDS",
            )
        time.sleep(POLL_S)
    return lines


def _abort(
    engine: Engine,
    dep_id: int,
    t: Transport | None,
    workdirs: dict[str, str],
    state: str,
    why: str,
    opts: Options,
) -> None:
    """Stop whatever was started (pids from the DB and from pid files), release, record the final state."""
    left_total = 0
    logs: dict[str, str] = {}
    if workdirs:
        with session_scope(engine, write=False) as s:
            p = get_deployment(s, dep_id)
            endpoint = get_device(s, p.device_name).endpoint()
        try:
            t2 = t or connect(endpoint, opts)
            for _name, wd in workdirs.items():
                pid = remote.pid_from_file(t2, wd)
                if pid:
                    left_total += remote.stop(t2, pid, opts.stop_grace_s)
            logs = remote.fetch_logs(t2, workdirs)
        except (EdgelabError, OSError) as e:
            why += f"; cleanup could not reach the device: {e}"
            left_total = -1

    def final(s, d: Deployment) -> None:
        for row in processes(s, d.pk):
            row.state = ProcessState.KILLED if left_total == 0 else ProcessState.UNKNOWN
            row.stopped_at = utcnow()
            s.add(row)
        d.error = why[:2000]
        d.logs = logs
        d.to_stop = left_total != 0  # not seen gone: memory held until a stop sees them gone

    transition(
        engine,
        dep_id,
        state if left_total >= 0 else DeploymentState.DEVICE_LOST,
        phase="aborted",
        edit=final,
        why=why[:300],
        left=left_total,
    )
