"""Deploy control: stop a run, refresh it from the device, read its logs (from any process, any time).

A running deployment is found through the database alone (its processes' group pids and run
directories), so the shell that deployed it, another shell, the TUI or a CI job can stop it.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import Engine

from edgelab.deploy import remote
from edgelab.deploy.options import Options, connect
from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.results import adapter_results, reported_entries, wav_outputs
from edgelab.deploy.transition import transition
from edgelab.errors import DeviceInUse, EdgelabError, TransportError
from edgelab.lease.owner import Holder
from edgelab.metrics.ingest import store_reported
from edgelab.store.db import session_scope
from edgelab.store.deployments import (
    ACTIVE_STATES,
    GONE_PROCESS_STATES,
    Deployment,
    DeploymentState,
    ProcessState,
    get_deployment,
    processes,
)
from edgelab.store.devices import get_device
from edgelab.store.models import utcnow
from edgelab.store.runs import Run


def owner_of(engine: Engine, dep: Deployment, holder: Holder) -> str | None:
    """Whose the running deployment is when not ``holder``'s: its open lease's holder and what for
    (None: the caller's own, or no live lease holds it any more)."""
    from edgelab.lease.service import mine
    from edgelab.store.leases import Lease

    if not dep.lease_id or dep.state not in ACTIVE_STATES:
        return None
    with session_scope(engine, write=False) as s:
        lease = s.get(Lease, dep.lease_id)
        if lease is None or lease.released_at is not None or mine(lease, holder):
            return None
        who = f"{lease.owner} ({lease.ci_job})" if lease.ci_job else lease.owner
        return f"{who}, lease {lease.id}" + (f" for {lease.purpose!r}" if lease.purpose else "")


def stop(
    engine: Engine,
    ref: str | int,
    *,
    opts: Options | None = None,
    holder: Holder | None = None,
    force: bool = False,
) -> Deployment:
    """Kill every process group of the run, verify they are gone, fetch logs, release the reservation.

    With ``holder`` (an operator's stop), a run under someone else's open lease is refused naming
    whose it is, unless ``force``; a forced stop is recorded on the run (``meta.stopped_by``).
    """
    opts = opts or Options()
    with session_scope(engine, write=False) as s:
        dep = get_deployment(s, ref)
        rows = processes(s, dep.pk)
        endpoint = get_device(s, dep.device_name).endpoint()
    theirs = owner_of(engine, dep, holder) if holder is not None else None
    if theirs and not force:
        raise DeviceInUse(
            f"run {dep.run_id} is not yours: it runs under {theirs}",
            remedy=f"ask them to stop it, or `edgelab stop {dep.run_id} --force` (recorded on the run)",
        )
    if theirs and holder is not None:
        with session_scope(engine) as s:
            run = s.get(Run, dep.run_id)
            if run is not None:
                run.meta = {
                    **(run.meta or {}),
                    "stopped_by": {"by": holder.label(), "owner": theirs, "force": True},
                }
                s.add(run)
    # a device-lost run's processes were never seen to end: they are stopped once the device answers
    unproven = dep.to_stop or (
        dep.state == DeploymentState.DEVICE_LOST
        and any(r.pid and r.state not in GONE_PROCESS_STATES for r in rows)
    )
    if dep.state not in ACTIVE_STATES and not unproven:
        return transition(engine, dep.pk, dep.state)  # a final run never holds memory, nor a lease
    try:
        t = connect(endpoint, opts)
        try:
            left = {}
            for row in rows:
                if row.pid:
                    left[row.name] = remote.stop(t, row.pid, opts.stop_grace_s)
            workdirs = {r.name: r.workdir for r in rows}
            if (
                dep.state == DeploymentState.STARTING
            ):  # one launched before its row was written left its pid file
                for pr in ExecutionPlan.from_dict(dep.plan).processes:
                    if pr.name not in workdirs:
                        workdirs[pr.name] = wd = f"{dep.remote_dir}/{pr.name}"
                        pid = remote.pid_from_file(t, wd)
                        left[pr.name] = remote.stop(t, pid, opts.stop_grace_s) if pid else 0
            logs = remote.fetch_logs(t, workdirs)
        finally:
            t.close()
    except TransportError as e:
        # the transport's own class (device not answering, host key, ...) with the run's context
        raise type(e)(
            f"{dep.device_name} is unreachable; run {dep.run_id} stays {dep.state} and its processes "
            f"may still run there: {e}",
            remedy=(getattr(e, "remedy", None) or "bring the device back")
            + f"; then `edgelab stop {dep.run_id}` again",
        ) from None
    if any(left.values()):
        raise EdgelabError(
            f"run {dep.run_id}: processes survived the stop: "
            + ", ".join(f"{k} ({v} left)" for k, v in left.items() if v),
            remedy="stop again; check the device for processes in that group",
        )

    def final(s, d: Deployment) -> None:
        for row in processes(s, d.pk):
            row.state, row.stopped_at = ProcessState.KILLED, utcnow()
            s.add(row)
        d.logs, d.to_stop = logs, False

    return transition(engine, dep.pk, DeploymentState.STOPPED, phase=DeploymentState.STOPPED, edit=final)


def refresh(engine: Engine, ref: str | int, *, opts: Options | None = None) -> Deployment:
    """Look at the device: a run whose processes all ended is finished/failed; an unreachable one device-lost.

    A device-lost run keeps its reservation and the ``to_stop`` mark: its processes were not seen
    to end, so its memory is counted until ``stop`` (or the next command that reaches the device,
    :mod:`edgelab.deploy.reap`) kills them and sees them gone.
    """
    opts = opts or Options()
    with session_scope(engine, write=False) as s:
        dep = get_deployment(s, ref)
        rows = processes(s, dep.pk)
        endpoint = get_device(s, dep.device_name).endpoint()
    if dep.state != DeploymentState.RUNNING:
        return dep
    try:
        t = connect(endpoint, opts)
        try:
            status = {r.name: (remote.alive(t, r.pid) if r.pid else False) for r in rows}
            codes = {}
            for r in rows:
                if not status[r.name]:
                    # a process that never got a pid (its start failed) has no exit code to read
                    codes[r.name] = remote.poll(t, r.workdir, r.pid, 1 << 40).exit_code if r.pid else None
            logs = (
                remote.fetch_logs(t, {r.name: r.workdir for r in rows}) if not any(status.values()) else None
            )
            outputs = (
                wav_outputs(t, dep.plan or {}, {r.name: r.workdir for r in rows})
                if logs is not None
                else None
            )
        finally:
            t.close()
    except TransportError as e:
        msg = str(e)
        unseen = any(r.pid and r.state not in GONE_PROCESS_STATES for r in rows)

        def lost(s, d: Deployment) -> None:  # its processes may still run: memory held, marked to stop
            d.error, d.to_stop = msg[:2000], unseen

        return transition(
            engine, dep.pk, DeploymentState.DEVICE_LOST, phase=DeploymentState.DEVICE_LOST, edit=lost
        )
    if any(status.values()):
        return dep
    ok = all(c == 0 for c in codes.values())
    results = adapter_results(dep.plan or {}, logs or {}, outputs)

    def ended(s, d: Deployment) -> None:
        d.logs = logs or {}
        d.error = None if ok else f"exit codes {codes}"
        for row in processes(s, d.pk):
            row.state, row.exit_code, row.stopped_at = ProcessState.EXITED, codes.get(row.name), utcnow()
            s.add(row)
        run = s.get(Run, d.run_id)
        if results and run is not None:
            run.meta = {**(run.meta or {}), "results": results}
            s.add(run)

    done = transition(
        engine,
        dep.pk,
        DeploymentState.FINISHED if ok else DeploymentState.FAILED,
        phase="ended",
        edit=ended,
        exit_codes=codes,
    )
    reported = reported_entries(results)
    if reported:  # a one-shot program's own figures: requests with counts in the run's summary
        store_reported(engine, dep.run_id, reported)
    return done


def log_lines(
    engine: Engine,
    ref: str | int,
    *,
    follow: bool = False,
    stream: str = "stdout",
    opts: Options | None = None,
) -> Iterator[str]:
    """The run's remote log lines (all processes); ``follow`` keeps streaming until the caller stops."""
    opts = opts or Options()
    with session_scope(engine, write=False) as s:
        dep = get_deployment(s, ref)
        rows = processes(s, dep.pk)
        endpoint = get_device(s, dep.device_name).endpoint()
    if dep.state not in ACTIVE_STATES and dep.logs:
        for key, text in dep.logs.items():
            if key.endswith(f"/{stream}.log"):
                yield from text.splitlines()
        return
    t = connect(endpoint, opts)
    try:
        if not follow:
            for r in rows:
                yield from remote.read_file(
                    t, f"{r.workdir}/{stream}.log", remote.LOG_TAIL_BYTES
                ).splitlines()
            return
        r = rows[0]
        with remote.follow(t, f"{r.workdir}/{stream}.log") as proc:
            yield from proc.lines()
    finally:
        t.close()
