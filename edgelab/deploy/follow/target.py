"""What a follower follows and how it reaches it: the deployment's event log on the device, or
its llama-server measured from the lab; the device's endpoint and the follower's transport."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from edgelab.deploy.plan import ExecutionPlan
from edgelab.errors import EdgelabError
from edgelab.runtimes.spec import Adapter
from edgelab.store.db import session_scope
from edgelab.store.deployments import get_deployment, processes
from edgelab.store.devices import get_device

READ_TIMEOUT_S = 3.0  # one read (the heartbeat) waits this long; the last check before LOSS_S fits in it


@dataclass(frozen=True)
class LogTarget:
    """The process that writes edgelab events: its ``stdout.log`` on the device, read from an offset."""

    endpoint: Any
    path: str
    pid: int | None


@dataclass(frozen=True)
class ServerTarget:
    """A llama-server the follower drives itself (requests from the lab, through a forward)."""

    endpoint: Any
    port: int
    pid: int | None
    device: str | None


def server_target(engine: Engine, run_id: str) -> ServerTarget | None:
    """The deployment's process measured from the lab side (llama-server), if it has one."""
    with session_scope(engine, write=False) as s:
        dep = get_deployment(s, run_id)
        rows = {r.name: r for r in processes(s, dep.pk)}
        endpoint = get_device(s, dep.device_name).endpoint()
        plan = ExecutionPlan.from_dict(dep.plan)
    for pr in plan.processes:
        if pr.adapter == Adapter.LLAMA_SERVER and pr.port and pr.name in rows:
            return ServerTarget(endpoint, int(pr.port), rows[pr.name].pid, plan.device or None)
    return None


def log_target(engine: Engine, run_id: str) -> LogTarget:
    """The process whose log carries the run's events: the plan's edgelab-events adapter, else the
    reference workload, else the first process."""
    with session_scope(engine, write=False) as s:
        dep = get_deployment(s, run_id)
        rows = processes(s, dep.pk)
        endpoint = get_device(s, dep.device_name).endpoint()
    if not rows:
        raise EdgelabError(f"run {run_id} has no process to follow", remedy="deploy it first")
    adapters = {pr.name: pr.adapter for pr in ExecutionPlan.from_dict(dep.plan).processes}
    row = next((r for r in rows if adapters.get(r.name) == Adapter.EDGELAB_EVENTS), None) or next(
        (r for r in rows if "edgelab.reference" in (r.argv or [])), rows[0]
    )
    return LogTarget(endpoint, f"{row.workdir}/stdout.log", row.pid)


def target(engine: Engine, run_id: str) -> LogTarget | ServerTarget:
    """What to follow: the server when the deployment has one, else the event log."""
    return server_target(engine, run_id) or log_target(engine, run_id)


def connect(endpoint: Any, transport: dict[str, Any] | None, timeout: float | None = None):
    """The follower's transport: each operation on it waits at most ``timeout`` (the heartbeat's)."""
    from edgelab.transport import open_transport

    return open_transport(endpoint, **{**(transport or {}), "timeout": timeout or READ_TIMEOUT_S})
