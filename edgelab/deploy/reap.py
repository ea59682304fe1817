"""Reaping: what a command that died left behind is finished by the next command that looks.

A deploy or bench run records its owner process (:mod:`edgelab.deploy.owner`). When that process
is proven gone while the run is still its own (a deployment ``pending`` or ``starting``, a bench
``pending`` or ``running``), the next command that looks (``ps``, ``deploy``, ``bench``, ``play``,
``stop``) stops the remote processes it may have started (the recorded pids and the pid files in
the run's directories), releases the reservation and ends the run ``failed`` with why. A
deployment marked ``to_stop`` (its device was lost, or a cleanup was cut short), or a running
``ephemeral`` one (a playbook's) whose play is gone, is stopped the same way once its device
answers. A device that does not answer leaves the run marked ``to_stop`` with its memory held:
nothing is released before its processes are seen gone.
"""

from __future__ import annotations

from sqlalchemy import Engine
from sqlmodel import col, select

from edgelab.deploy import owner, remote
from edgelab.deploy.options import Options, connect
from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.transition import transition
from edgelab.errors import EdgelabError
from edgelab.store.db import session_scope
from edgelab.store.deployments import Deployment, DeploymentState, ProcessState, processes, release_run
from edgelab.store.devices import get_device
from edgelab.store.models import utcnow
from edgelab.store.runs import ACTIVE_STATES, Run, RunState, get_run, set_state

OWNED = {
    "deploy": (DeploymentState.PENDING, DeploymentState.STARTING),
    "bench": (RunState.PENDING, RunState.RUNNING),
}


def _why(run: Run) -> str:
    return (
        f"its {run.kind} process (pid {run.owner_pid} on {run.owner_host}) ended before it finished; "
        "reaped by the next command"
    )


def orphaned(engine: Engine, device: str | None = None) -> list[str]:
    """Run ids whose owner is proven gone while the run was still its own, plus deployments marked to_stop."""
    out: list[str] = []
    with session_scope(engine, write=False) as s:
        q = select(Run).where(
            col(Run.state).in_(sorted(ACTIVE_STATES)),
            col(Run.kind).in_(tuple(OWNED)),
            col(Run.owner_pid).is_not(None),
        )
        if device:
            q = q.where(Run.device_name == device)
        for run in s.exec(q).all():
            if not owner.gone(run.owner_pid, run.owner_host, run.owner_start):
                continue
            if run.kind == "deploy":
                dep = s.exec(select(Deployment).where(Deployment.run_id == run.id)).first()
                ephemeral = (
                    dep is not None
                    and dep.state == DeploymentState.RUNNING
                    and (run.meta or {}).get("ephemeral")
                )
                if dep is None or (dep.state not in OWNED["deploy"] and not ephemeral):
                    continue
            out.append(run.id)
        q2 = select(Deployment).where(Deployment.to_stop == True)  # noqa: E712
        if device:
            q2 = q2.where(Deployment.device_name == device)
        out += [d.run_id for d in s.exec(q2).all() if d.run_id not in out]
    return out


def reap(
    engine: Engine,
    device: str | None = None,
    *,
    opts: Options | None = None,
    unreachable: dict[str, EdgelabError] | None = None,
) -> list[str]:
    """Finish what dead commands left (see the module doc); returns the run ids reaped now.

    A device that cannot be reached is left for the next look (never raised here: the command
    that looked goes on with its own work); ``unreachable`` collects why, per device, for a
    caller that reports it (``ps``).
    """
    opts = opts or Options()
    done = []
    for run_id in orphaned(engine, device):
        try:
            if _reap_one(engine, run_id, opts):
                done.append(run_id)
        except EdgelabError as err:
            if unreachable is not None:
                with session_scope(engine, write=False) as s:
                    unreachable.setdefault(get_run(s, run_id).device_name or "?", err)
            continue
    return done


def _reap_one(engine: Engine, run_id: str, opts: Options) -> bool:
    with session_scope(engine, write=False) as s:
        run = get_run(s, run_id)
        dep = s.exec(select(Deployment).where(Deployment.run_id == run_id)).first()
        kind, why = run.kind, _why(run)
        bench_workdir = (run.meta or {}).get("workdir")
        if dep is not None:
            rows = processes(s, dep.pk)
            workdirs = {r.name: r.workdir for r in rows if r.workdir}
            if (
                dep.state == DeploymentState.STARTING
            ):  # launched ones wrote pid files even if their rows were never written
                for pr in ExecutionPlan.from_dict(dep.plan).processes:
                    workdirs.setdefault(pr.name, f"{dep.remote_dir}/{pr.name}")
            pids = [r.pid for r in rows if r.pid]
            state, to_stop = dep.state, dep.to_stop
        endpoint = get_device(s, run.device_name or "").endpoint()
    if kind == "deploy" and dep is not None:
        if (
            to_stop or state == DeploymentState.RUNNING
        ):  # marked, or a playbook's deployment that outlived its play
            from edgelab.deploy.control import stop

            stop(engine, run_id, opts=opts)  # raises while the device does not answer
            return True
        if (
            state == DeploymentState.PENDING and not workdirs
        ):  # admitted, never connected: nothing runs anywhere
            transition(
                engine,
                dep.pk,
                DeploymentState.FAILED,
                phase="reaped",
                edit=lambda s, d: setattr(d, "error", why),
            )
            return True
        try:
            left, logs = _stop_remote(endpoint, opts, pids, workdirs)
        except EdgelabError as e:
            err = str(e)

            def lost(s, d: Deployment) -> None:
                d.to_stop, d.error = True, f"{why}; its processes could not be stopped yet: {err}"[:2000]

            transition(engine, dep.pk, DeploymentState.DEVICE_LOST, phase="reaped", edit=lost)
            return False

        def ended(s, d: Deployment) -> None:
            for row in processes(s, d.pk):
                row.state, row.stopped_at = (
                    (ProcessState.KILLED if not left else ProcessState.UNKNOWN),
                    utcnow(),
                )
                s.add(row)
            d.error, d.logs, d.to_stop = why, logs, bool(left)

        transition(
            engine,
            dep.pk,
            DeploymentState.FAILED if not left else DeploymentState.DEVICE_LOST,
            phase="reaped",
            edit=ended,
            left=left,
        )
        return not left
    # a bench: its streamed process died with its channel; a detached one (llama-server) has a pid file
    if bench_workdir:
        left, _logs = _stop_remote(endpoint, opts, [], {"bench": bench_workdir})
        if left:
            return False
    with session_scope(engine) as s:
        release_run(s, run_id)
        run = get_run(s, run_id)
        if run.state in ACTIVE_STATES:
            set_state(s, run, RunState.FAILED, error=why)
    return True


def _stop_remote(
    endpoint, opts: Options, pids: list[int], workdirs: dict[str, str]
) -> tuple[int, dict[str, str]]:
    """Stop the groups (recorded pids and pid files); (members left, log tails)."""
    t = connect(endpoint, opts)
    try:
        found = set(pids)
        for wd in workdirs.values():
            pid = remote.pid_from_file(t, wd)
            if pid:
                found.add(pid)
        left = sum(remote.stop(t, pid, opts.stop_grace_s) for pid in sorted(found))
        return left, remote.fetch_logs(t, workdirs)
    finally:
        t.close()
