"""Deploy, watch and stop: plan -> admission -> push -> detached launch -> readiness -> running.

Every state change goes to the database first, so another process can see and stop a deployment.
Anything that interrupts a deploy (Ctrl-C, a failed readiness, a lost connection) stops what was
started, releases the reservation and leaves the run in a final state with its phases and logs.
"""

from __future__ import annotations

import getpass
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from edgelab.catalog.devices import load_devices
from edgelab.catalog.pipelines import load_pipelines, resolve_pipeline_id
from edgelab.deploy import admission, placement, ready, remote, start
from edgelab.deploy import artifacts as plan_artifacts
from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.refusal import Refusal
from edgelab.deploy.strategies import PlanContext, build_plan
from edgelab.errors import EdgelabError, TransportError
from edgelab.lease.use import unpin
from edgelab.metrics.provenance import for_plan
from edgelab.probe.facts import Facts
from edgelab.profile import DeployProfile, derive_profile
from edgelab.store.db import session_scope
from edgelab.store.deployments import (
    ACTIVE_STATES,
    DeployAttempt,
    Deployment,
    DeploymentProcess,
    add_phase,
    get_deployment,
    processes,
    record_attempt,
    release,
)
from edgelab.store.devices import get_device
from edgelab.store.models import utcnow
from edgelab.store.runs import Run, create_run, new_run_id, set_state
from edgelab.store.snapshots import latest_snapshot
from edgelab.transport import Transport, open_transport
from edgelab.transport.quoting import Shell

POLL_S = 0.5
LOG_TAIL_BYTES = 65536

Phase = Callable[[str, dict[str, Any]], None]


@dataclass
class DeployRequest:
    device: str
    pipeline: str
    strategy: str | None = None
    runtime: str | None = None
    endpoint: str | None = None
    model: str | None = None  # a model artifact by name (default: the newest registered for the pipeline)
    values: dict[str, Any] = field(default_factory=dict)  # launch template values that override the plan's
    threads: int | None = None  # override the profile's thread count
    purpose: str = "deploy"  # bench: a template's bench variant (e.g. llama-bench for S5)
    ready_timeout: float | None = None  # start-up limit in seconds (default: the profile's load estimate)


@dataclass
class Planned:
    """A plan and its admission, before anything is reserved or touched."""

    request: DeployRequest
    plan: ExecutionPlan
    profile: DeployProfile
    admission: list[dict[str, Any]]
    facts_hash: str | None
    virtual: bool
    refusal: Refusal | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.request.device, "pipeline": self.plan.pipeline, "virtual": self.virtual,
                "plan": self.plan.to_dict(), "admission": self.admission,
                "refusal": self.refusal.to_dict() if self.refusal else None}


@dataclass
class Options:
    """Transport options (ssh_config, timeout) and the start-up grace for stops."""

    transport: dict[str, Any] = field(default_factory=dict)
    stop_grace_s: int = 5
    ready_timeout_s: float | None = None  # overrides the profile-derived timeout


def resolve_pipeline(name: str) -> str:
    """A pipeline id or an alias from the catalog (``qwen3-tts``) -> the id; unknown is a ConfigError."""
    return resolve_pipeline_id(name, load_pipelines())  # CatalogError is a ConfigError


def _connect(endpoint, opts: Options) -> Transport:
    return open_transport(endpoint, **opts.transport)


def plan(engine: Engine, req: DeployRequest, *, run_id: str | None = None) -> Planned:
    """Plan and check admission against the ledger; no write, no connection (what --dry-run shows)."""
    pipeline_id = resolve_pipeline(req.pipeline)
    spec = load_pipelines()[pipeline_id]
    with session_scope(engine, write=False) as s:
        device = get_device(s, req.device)
        snap = latest_snapshot(s, req.device)
        profile = derive_profile(Facts.from_dict(snap.facts or {}), load_devices(), spec,
                                 endpoint_configured=bool(req.endpoint))
        run = run_id or new_run_id()
        remote_root = "/data/local/tmp/edgelab/runs" if device.shell == "toybox" else "~/.edgelab/runs"
        ctx = PlanContext(device=device.name, spec=spec, profile=profile, pipeline_profile=profile.pipeline(spec.id),
                          run_id=run, remote_dir=f"{remote_root}/{run}", virtual=bool(device.virtual),
                          runtime=req.runtime, endpoint=req.endpoint, values=dict(req.values),
                          threads=req.threads, purpose=req.purpose)
        the_plan = admission.spread(build_plan(ctx, req.strategy), profile)
        if req.ready_timeout:
            the_plan.ready_timeout_s = float(req.ready_timeout)
        plan_artifacts.resolve(s, the_plan, list(profile.runtime_targets or []), model=req.model)
        _check_isa(the_plan, Facts.from_dict(snap.facts or {}), bool(device.virtual))
        planned = Planned(req, the_plan, profile, [], snap.facts_hash, bool(device.virtual))
        try:
            planned.admission = [line.to_dict() for line in admission.check(s, device, profile, the_plan)]
        except Refusal as r:
            planned.refusal = r
            planned.admission = [r.numbers] if r.numbers else []
    return planned


def _attempt(engine: Engine, req: DeployRequest, refusal: Refusal | None, deployment_id: int | None = None) -> None:
    with session_scope(engine) as s:
        record_attempt(s, DeployAttempt(
            device_name=req.device, pipeline=req.pipeline, strategy=req.strategy, runtime=req.runtime,
            outcome="refused" if refusal else "admitted", code=refusal.code if refusal else None,
            pool=refusal.pool if refusal else None, message=refusal.detail if refusal else None,
            remedy=refusal.remedy if refusal else None, numbers=refusal.numbers if refusal else {},
            deployment_id=deployment_id))


def _check_artifacts(p: ExecutionPlan) -> None:
    """Every process launchable here and every artifact registered; refused before anything is reserved.

    A process with no template for this pipeline, strategy or target says so first; the artifacts
    it would need are named beside it, so one refusal lists everything that is missing.
    """
    missing = plan_artifacts.missing_entries(p)
    what = ", ".join(_describe(e) for e in missing)
    remedies = list(dict.fromkeys(plan_artifacts.remedy_for(e) for e in missing))
    blocked = [f"{proc.name}: {proc.unavailable}" for proc in p.processes if proc.unavailable]
    if blocked:
        detail = "; ".join(blocked) + (f"; it also needs artifacts that are not registered: {what}" if missing else "")
        raise Refusal("no_exported_graph", detail, device=p.device, strategy=p.strategy,
                      remedy="; ".join(["choose a runtime and strategy with a launch template for this pipeline "
                                        "(`edgelab runtime show RUNTIME`), or add one to runtimes/*.yaml",
                                        *remedies]))
    if missing:
        raise Refusal("no_exported_graph", f"{p.runtime} needs artifacts that are not registered: {what}",
                      device=p.device, strategy=p.strategy, remedy="; ".join(remedies)
                      + ("" if p.virtual else "; or deploy on a virtual device with --runtime reference"))


def _host_cpu_flags() -> list[str]:
    try:
        text = open("/proc/cpuinfo", encoding="utf-8", errors="replace").read()
    except OSError:
        return []
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return line.split(":", 1)[1].split()
    return []


def _check_isa(p: ExecutionPlan, facts: Facts, virtual: bool) -> None:
    """A build that needs an instruction set the CPU lacks is not launchable (it would die of SIGILL).

    A virtual device runs the lab host's build on the lab host: the host's flags decide there.
    """
    from edgelab.runtimes.isa import isa_supported, missing_flags

    for e in p.artifacts:
        if not (e.get("present") and e.get("isa") and e.get("kind") == "runtime"):
            continue
        flags = _host_cpu_flags() if virtual else list(facts.cpu.raw_flags or facts.cpu.features or [])
        if isa_supported(e["isa"], flags):
            continue
        proc = next(pr for pr in p.processes if pr.name == e["process"])
        why = f"missing {', '.join(missing_flags(e['isa'], flags))}" if flags else "the CPU's flags are unknown"
        proc.unavailable = (f"{e['name']} needs instruction set {e['isa']}, which "
                            f"{'the lab host' if virtual else p.device} cannot run ({why})")


def _describe(e: dict[str, Any]) -> str:
    if e.get("kind") == "runtime":
        progs = f" with {', '.join(e['programs'])}" if e.get("programs") else ""
        return f"a {e.get('runtime')} build for {e.get('target')}{progs}" + (f" with a {e['ext']} file" if e.get("ext") else "")
    if e.get("kind") in ("model", "weights"):
        return f"a {e.get('ext') or ''} model for {e.get('pipeline')} ({e.get('role')})"
    return str(e.get("role"))


def deploy(engine: Engine, req: DeployRequest, *, opts: Options | None = None,
           on_phase: Phase | None = None, lease_id: str | None = None) -> Deployment:
    """Plan, admit, push, launch and wait until ready; returns the running deployment.

    Runs under a lease on the device (the caller's ``lease_id`` / ``EDGELAB_LEASE``, the holder's
    own, or one of its own), renewed while it starts; the running deployment keeps that lease
    until it is stopped. Raises LeaseHeld when someone else holds the device, and Refusal before
    anything is pushed or launched when the plan cannot run here.
    """
    from edgelab.lease import held

    with held(engine, [req.device], f"deploy {req.pipeline}", lease_id=lease_id) as use:
        return _deploy(engine, req, opts or Options(), on_phase, use.lease_for(req.device))


def _deploy(engine: Engine, req: DeployRequest, opts: Options, on_phase: Phase | None,
            lease_id: str | None) -> Deployment:
    run_id = new_run_id()
    try:
        planned = plan(engine, req, run_id=run_id)
        if planned.refusal:
            raise planned.refusal
        _check_artifacts(planned.plan)
    except Refusal as r:
        _attempt(engine, req, r)
        raise
    p = planned.plan
    try:
        with session_scope(engine) as s:
            device = get_device(s, req.device)
            command = " ".join(" ".join(pr.argv) for pr in p.processes)[:4000]
            prov = for_plan(s, device=device.name, virtual=planned.virtual, plan=p.to_dict(),
                            facts_hash=planned.facts_hash, profile=planned.profile.device_class, command=command,
                            source="deploy", run_id=run_id)
            create_run(s, id=run_id, pipeline=p.pipeline, device_name=device.name, runtime=p.runtime,
                       strategy=p.strategy, kind="deploy", virtual=planned.virtual, command=command,
                       provenance={**prov, "plan": p.to_dict()})
            dep = Deployment(run_id=run_id, device_id=device.id, device_name=device.name, pipeline=p.pipeline,
                             strategy=p.strategy, runtime=p.runtime, state="pending", plan=p.to_dict(),
                             facts_hash=planned.facts_hash, virtual=planned.virtual, remote_dir=p.remote_dir,
                             owner=f"{getpass.getuser()}@{socket.gethostname()}"[:64], lease_id=lease_id)
            s.add(dep)
            s.flush()
            lines = admission.admit(s, device, planned.profile, p, dep, lease_id=lease_id)
            dep.admission = {"pools": [line.to_dict() for line in lines]}
            add_phase(dep, "admitted")
            s.add(dep)
    except Refusal as r:
        _attempt(engine, req, r)
        raise
    _attempt(engine, req, None, dep.id)
    _phase(on_phase, "admitted", {"run": run_id, "strategy": p.strategy, "runtime": p.runtime})
    return _launch(engine, dep.id, p, opts, on_phase)


def _phase(cb: Phase | None, name: str, info: dict[str, Any]) -> None:
    if cb:
        cb(name, info)


def _sync_run(s, dep: Deployment) -> None:
    """Mirror the deployment's state on its run (a deployment is a run; the run has fewer states)."""
    run = s.get(Run, dep.run_id)
    want = "pending" if dep.state in ("pending", "starting") else dep.state
    if run is not None and run.state != want:
        set_state(s, run, want, error=dep.error)


def _update(engine: Engine, dep_id: int, fn: Callable[[Any, Deployment], None]) -> Deployment:
    with session_scope(engine) as s:
        dep = s.get(Deployment, dep_id)
        fn(s, dep)
        s.add(dep)
        s.flush()
        _sync_run(s, dep)
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


def _launch(engine: Engine, dep_id: int, p: ExecutionPlan, opts: Options, on_phase: Phase | None) -> Deployment:
    t: Transport | None = None
    workdirs: dict[str, str] = {}
    try:
        with session_scope(engine, write=False) as s:
            run_id = s.get(Deployment, dep_id).run_id
            endpoint = get_device(s, p.device).endpoint()
        t0 = time.monotonic()
        try:
            t = _connect(endpoint, opts)
            root = remote.run_root(t)
        except TransportError as e:
            raise Refusal("device_unreachable", str(e), device=p.device, remedy=e.remedy or
                          f"run `edgelab device check {p.device}`") from e
        run_dir = f"{root}/{run_id}"
        _update(engine, dep_id, lambda s, d: (setattr(d, "remote_dir", run_dir), setattr(d, "state", "starting"),
                                              add_phase(d, "connected", seconds=round(time.monotonic() - t0, 3))))
        _phase(on_phase, "connected", {"remote_dir": run_dir})
        with session_scope(engine, write=False) as s:
            device_id = s.get(Deployment, dep_id).device_id
        blob_paths, pushed = plan_artifacts.push(engine, t, device_id, p)
        _update(engine, dep_id, lambda s, d: add_phase(d, "pushed", artifacts=len(p.artifacts), blobs=pushed))
        _phase(on_phase, "pushed", {"blobs": pushed})
        for proc in p.processes:
            if proc.port and t.shell is not Shell.POWERSHELL and ready.listening(t, proc.port):
                # another server answering on the port would pass this one's readiness check
                raise EdgelabError(f"port {proc.port} is already in use on {p.device}",
                                   remedy="stop what listens there (`edgelab ps`), or deploy again")
            wd = f"{run_dir}/{proc.name}"
            workdirs[proc.name] = wd
            ts = time.monotonic()
            started = start.start(t, proc, wd, blob_paths)
            pid = started.pid
            with session_scope(engine) as s:
                s.add(DeploymentProcess(deployment_id=dep_id, name=proc.name, argv=started.argv, workdir=wd,
                                        pid=pid, state="running", started_at=utcnow()))
                dep = s.get(Deployment, dep_id)
                add_phase(dep, f"spawned:{proc.name}", pid=pid, seconds=round(time.monotonic() - ts, 3))
                s.add(dep)
            _phase(on_phase, "spawned", {"process": proc.name, "pid": pid})
        timeout = opts.ready_timeout_s or p.ready_timeout_s
        lines = _wait_ready(t, p, workdirs, dep_id, engine, timeout, on_phase)
        for proc in p.processes:  # runtimes log their load (and placement) on stderr
            if proc.placement == "llama-load-log":
                lines[proc.name] = lines[proc.name] + remote.read_file(
                    t, f"{workdirs[proc.name]}/stderr.log", LOG_TAIL_BYTES).splitlines()
        obs = placement.observe(p, lines)

        def running(s, d: Deployment) -> None:
            d.state = "running"
            d.started_at = utcnow()
            d.placement = obs
            add_phase(d, "ready", seconds=round(time.monotonic() - t0, 3))
        dep = _update(engine, dep_id, running)
        _phase(on_phase, "ready", {"placement": obs})
        return dep
    except BaseException as exc:
        with _no_sigint():
            state = "stopped" if isinstance(exc, KeyboardInterrupt) else "failed"
            why = "interrupted (SIGINT) during deploy" if isinstance(exc, KeyboardInterrupt) else \
                (str(exc) or type(exc).__name__)
            _abort(engine, dep_id, t, workdirs, state, why, opts)
        raise
    finally:
        if t is not None:
            try:
                t.close()
            except Exception:  # noqa: BLE001
                pass


def _wait_ready(t: Transport, p: ExecutionPlan, workdirs: dict[str, str], dep_id: int, engine: Engine,
                timeout: float, on_phase: Phase | None) -> dict[str, list[str]]:
    """Poll each process until its template's readiness holds (log line, HTTP 200, port, alive)."""
    deadline = time.monotonic() + timeout
    lines: dict[str, list[str]] = {proc.name: [] for proc in p.processes}
    offsets = dict.fromkeys(lines, 0)
    pending = {proc.name: proc for proc in p.processes}
    pids = {}
    with session_scope(engine, write=False) as s:
        for row in processes(s, dep_id):
            pids[row.name] = row.pid
    while pending:
        for name, proc in list(pending.items()):
            got = remote.poll(t, workdirs[name], pids[name], offsets[name])
            offsets[name] += len(got.text.encode())
            new = got.text.splitlines()
            lines[name].extend(new)
            kind = (proc.ready or {}).get("kind") or ("log" if proc.ready_pattern else "alive")
            if kind == "log":
                ok = ready.matches(proc.ready_pattern or proc.ready.get("pattern"), new)
            elif kind == "http":
                ok = got.alive and ready.http_ok(t, int(proc.ready["port"]), str(proc.ready.get("path") or "/"))
            elif kind == "port":
                ok = got.alive and ready.listening(t, int(proc.ready["port"]))
            else:  # alive, or a one-shot program that already finished cleanly
                ok = got.alive or got.exit_code == 0
            if ok:
                del pending[name]
                _phase(on_phase, "ready_line", {"process": name, "check": kind})
                continue
            if not got.alive:
                err = remote.read_file(t, f"{workdirs[name]}/stderr.log", 2000).strip().splitlines()
                raise EdgelabError(f"{name} exited (code {got.exit_code}) before it was ready"
                                   + (f": {err[-1]}" if err else ""),
                                   remedy=f"see `edgelab logs` of the run; command: {' '.join(proc.argv)[:200]}")
        if not pending:
            break
        if time.monotonic() > deadline:
            raise EdgelabError(f"{', '.join(pending)} not ready after {timeout:g}s (from the profile's load-time "
                               "estimate)", remedy="see `edgelab logs`; a cold start can be slow (S1: 95-355 s): "
                                                   "give more with --ready-timeout SECONDS")
        time.sleep(POLL_S)
    return lines


def _fetch_logs(t: Transport, workdirs: dict[str, str]) -> dict[str, str]:
    out = {}
    for name, wd in workdirs.items():
        for f in ("stdout.log", "stderr.log"):
            try:
                out[f"{name}/{f}"] = remote.read_file(t, f"{wd}/{f}", LOG_TAIL_BYTES)
            except EdgelabError:
                pass
    return out


def _abort(engine: Engine, dep_id: int, t: Transport | None, workdirs: dict[str, str], state: str, why: str,
           opts: Options) -> None:
    """Stop whatever was started (pids from the DB and from pid files), release, record the final state."""
    left_total = 0
    logs: dict[str, str] = {}
    if workdirs:
        with session_scope(engine, write=False) as s:
            p = s.get(Deployment, dep_id)
            endpoint = get_device(s, p.device_name).endpoint()
        try:
            t2 = t or _connect(endpoint, opts)
            for _name, wd in workdirs.items():
                pid = remote.pid_from_file(t2, wd)
                if pid:
                    left_total += remote.stop(t2, pid, opts.stop_grace_s)
            logs = _fetch_logs(t2, workdirs)
        except (EdgelabError, OSError) as e:
            why += f"; cleanup could not reach the device: {e}"
            left_total = -1

    def final(s, d: Deployment) -> None:
        release(s, d.id)
        for row in processes(s, d.id):
            row.state = "killed" if left_total == 0 else "unknown"
            row.stopped_at = utcnow()
            s.add(row)
        d.state = state if left_total >= 0 else "device-lost"
        d.error = why[:2000]
        d.ended_at = utcnow()
        d.logs = logs
        add_phase(d, "aborted", why=why[:300], left=left_total)
    _update(engine, dep_id, final)


GONE_PROCESS_STATES = ("killed", "exited", "gone")


def stop(engine: Engine, ref: str | int, *, opts: Options | None = None) -> Deployment:
    """Kill every process group of the run, verify they are gone, fetch logs, release the reservation."""
    opts = opts or Options()
    with session_scope(engine, write=False) as s:
        dep = get_deployment(s, ref)
        rows = processes(s, dep.id)
        endpoint = get_device(s, dep.device_name).endpoint()
    # a device-lost run's processes were never seen to end: they are stopped once the device answers
    unproven = dep.state == "device-lost" and any(r.pid and r.state not in GONE_PROCESS_STATES for r in rows)
    if dep.state not in ACTIVE_STATES and not unproven:
        with session_scope(engine) as s:
            release(s, dep.id)  # a final run never holds memory, nor a lease
            unpin(s, s.get(Deployment, dep.id))
        return dep
    try:
        t = _connect(endpoint, opts)
        try:
            left = {}
            for row in rows:
                if row.pid:
                    left[row.name] = remote.stop(t, row.pid, opts.stop_grace_s)
            logs = _fetch_logs(t, {r.name: r.workdir for r in rows})
        finally:
            t.close()
    except TransportError as e:
        # the transport's own class (device not answering, host key, ...) with the run's context
        raise type(e)(f"{dep.device_name} is unreachable; run {dep.run_id} stays {dep.state} and its processes "
                      f"may still run there: {e}",
                      remedy=(getattr(e, "remedy", None) or "bring the device back")
                      + f"; then `edgelab stop {dep.run_id}` again") from None
    if any(left.values()):
        raise EdgelabError(f"run {dep.run_id}: processes survived the stop: "
                           + ", ".join(f"{k} ({v} left)" for k, v in left.items() if v),
                           remedy="stop again; check the device for processes in that group")

    def final(s, d: Deployment) -> None:
        release(s, d.id)
        for row in processes(s, d.id):
            row.state, row.stopped_at = "killed", utcnow()
            s.add(row)
        d.state, d.ended_at, d.logs = "stopped", utcnow(), logs
        add_phase(d, "stopped")
        unpin(s, d)
    return _update(engine, dep.id, final)


def refresh(engine: Engine, ref: str | int, *, opts: Options | None = None) -> Deployment:
    """Look at the device: a run whose processes all ended is finished/failed; an unreachable one device-lost."""
    opts = opts or Options()
    with session_scope(engine, write=False) as s:
        dep = get_deployment(s, ref)
        rows = processes(s, dep.id)
        endpoint = get_device(s, dep.device_name).endpoint()
    if dep.state != "running":
        return dep
    try:
        t = _connect(endpoint, opts)
        try:
            status = {r.name: (remote.alive(t, r.pid) if r.pid else False) for r in rows}
            codes = {}
            for r in rows:
                if not status[r.name]:
                    codes[r.name] = remote.poll(t, r.workdir, r.pid, 1 << 40).exit_code
            logs = _fetch_logs(t, {r.name: r.workdir for r in rows}) if not any(status.values()) else None
        finally:
            t.close()
    except TransportError as e:
        msg = str(e)

        def lost(s, d: Deployment) -> None:
            d.state, d.error, d.ended_at = "device-lost", msg[:2000], utcnow()
            release(s, d.id)
            add_phase(d, "device-lost")
            unpin(s, d)
        return _update(engine, dep.id, lost)
    if any(status.values()):
        return dep

    def ended(s, d: Deployment) -> None:
        ok = all(c == 0 for c in codes.values())
        d.state, d.ended_at, d.logs = ("finished" if ok else "failed"), utcnow(), logs or {}
        d.error = None if ok else f"exit codes {codes}"
        release(s, d.id)
        for row in processes(s, d.id):
            row.state, row.exit_code, row.stopped_at = "exited", codes.get(row.name), utcnow()
            s.add(row)
        add_phase(d, "ended", exit_codes=codes)
        unpin(s, d)
        results = adapter_results(d.plan or {}, logs or {})
        run = s.get(Run, d.run_id)
        if results and run is not None:
            run.meta = {**(run.meta or {}), "results": results}
            s.add(run)
    return _update(engine, dep.id, ended)


PERF_LOST = ("no perf lines in its stderr: llama.cpp's logger writes from a thread it never joins at exit, "
             "so a busy host can lose the last lines (ggml-org/llama.cpp#22142)")


def adapter_results(plan: dict[str, Any], logs: dict[str, str]) -> dict[str, Any]:
    """What a one-shot runtime reported, read by its template's adapter from the logs it left.

    llama-completion: the ``common_perf_print`` / ``llama_perf_context_print`` lines (load, prompt
    eval, eval: ms, tokens, tokens/s) and the placement its load log shows.
    """
    out: dict[str, Any] = {}
    for pr in plan.get("processes", []):
        err = logs.get(f"{pr.get('name')}/stderr.log") or ""
        if pr.get("adapter") == "llama-completion" and err:
            from edgelab.adapters.llama_perf import parse_perf
            from edgelab.adapters.llama_placement import parse_placement

            perf = parse_perf(err)
            out[pr["name"]] = {"adapter": "llama-completion", "perf": perf.to_dict() if perf else None,
                               "placement": parse_placement(err).observed or "unobserved"}
            if perf is None:  # said, never guessed: the run finished but its figures are not in the log
                out[pr["name"]]["perf_missing"] = PERF_LOST
    return out


def log_lines(engine: Engine, ref: str | int, *, follow: bool = False, stream: str = "stdout",
              opts: Options | None = None) -> Iterator[str]:
    """The run's remote log lines (all processes); ``follow`` keeps streaming until the caller stops."""
    opts = opts or Options()
    with session_scope(engine, write=False) as s:
        dep = get_deployment(s, ref)
        rows = processes(s, dep.id)
        endpoint = get_device(s, dep.device_name).endpoint()
    if dep.state not in ACTIVE_STATES and dep.logs:
        for key, text in dep.logs.items():
            if key.endswith(f"/{stream}.log"):
                yield from text.splitlines()
        return
    t = _connect(endpoint, opts)
    try:
        if not follow:
            for r in rows:
                yield from remote.read_file(t, f"{r.workdir}/{stream}.log", LOG_TAIL_BYTES).splitlines()
            return
        r = rows[0]
        with remote.follow(t, f"{r.workdir}/{stream}.log") as proc:
            yield from proc.lines()
    finally:
        t.close()
