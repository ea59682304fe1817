"""A workload's use of leases: take (or join) them, renew them while it runs, give them back.

``deploy``, ``bench``, ``play`` and ``push`` run inside :func:`held`: devices under the caller's
lease (``--lease ID`` / ``EDGELAB_LEASE``, or one the same holder took with ``edgelab reserve``)
are used under it; free ones get a lease of the workload's own (``auto``, short TTL); a device
under someone else's lease is refused with who holds it. A heartbeat thread renews every lease
in use each third of its TTL; a holder that dies stops renewing and its lease expires. A
deployment pins its lease while it runs (``pin``), so a deploy that returned keeps the device
until ``stop`` (``unpin``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import Engine
from sqlmodel import Session, select

from edgelab.errors import ConfigError
from edgelab.lease.owner import Holder, whoami
from edgelab.lease.service import (
    _alias,
    _lock,
    auto_ttl,
    devices_of,
    end,
    get_lease,
    held_error,
    kept_by,
    mine,
    new_id,
    open_holds,
    open_lease,
    physical_key,
    renew,
    sweep,
)
from edgelab.states import DeploymentState
from edgelab.store.db import session_scope
from edgelab.store.deployments import Deployment
from edgelab.store.devices import get_device
from edgelab.store.leases import Lease
from edgelab.store.models import utcnow


@dataclass
class Use:
    """The leases one workload runs under: device name -> lease id; ``own`` ones it created."""

    purpose: str
    by_device: dict[str, str] = field(default_factory=dict)
    own: set[str] = field(default_factory=set)
    lost: threading.Event = field(default_factory=threading.Event)
    lost_reason: str = ""

    @property
    def lease_ids(self) -> list[str]:
        return sorted(set(self.by_device.values()))

    def lease_for(self, device: str) -> str | None:
        return self.by_device.get(device)


def caller_lease(explicit: str | None = None) -> str | None:
    """``--lease ID`` or ``EDGELAB_LEASE``."""
    return explicit or os.environ.get("EDGELAB_LEASE") or None


def begin_use(
    engine: Engine,
    devices: list[str],
    purpose: str,
    *,
    lease_id: str | None = None,
    holder: Holder | None = None,
    ttl_s: float | None = None,
) -> Use:
    """Join or take leases on every device, in one transaction; LeaseHeld names the first taken one."""
    holder = holder or whoami()
    ttl = ttl_s or auto_ttl()
    use = Use(purpose)
    names = list(dict.fromkeys(devices))
    with session_scope(engine) as s:
        _lock(s)
        sweep(s)
        holds = open_holds(s)
        given = get_lease(s, lease_id) if lease_id else None
        if given is not None and given.released_at is not None:
            raise ConfigError(
                f"lease {given.id} ended ({given.end_reason}: {given.ended_by})",
                remedy="take a new one: `edgelab reserve DEVICE --for 30m`",
            )
        free = []
        for name in names:
            d = get_device(s, name)
            key = physical_key(d)
            lease = holds.get(key)
            if given is not None:
                if lease is None or lease.id != given.id:
                    raise ConfigError(
                        f"lease {given.id} does not cover {name}"
                        + (f"; {held_error(name, lease)}" if lease is not None else ""),
                        remedy=f"reserve {name} too, or run without --lease / EDGELAB_LEASE",
                    )
                use.by_device[name] = given.id
            elif lease is None:
                free.append((key, d))
            elif mine(lease, holder):
                use.by_device[name] = lease.id
            else:
                raise held_error(name, lease, runs=kept_by(s, lease.id), alias=_alias(s, lease, key))
        if free:
            own = open_lease(
                s, lease_id=new_id(), holder=holder, purpose=purpose, auto=True, ttl_s=ttl, devices=free
            )
            for _key, d in free:
                use.by_device[d.name] = own.id
            use.own.add(own.id)
        for lid in use.lease_ids:
            lease = s.get(Lease, lid)
            lease.users += 1
            if lid not in use.own:  # joining: start its clock again from now
                lease.heartbeat_at = utcnow()
                lease.expires_at = max(lease.expires_at, lease.heartbeat_at + timedelta(seconds=lease.ttl_s))
            s.add(lease)
    return use


def _pinned(s: Session, lease_id: str) -> bool:
    return (
        s.exec(
            select(Deployment.id).where(
                Deployment.lease_id == lease_id, Deployment.state == DeploymentState.RUNNING
            )
        ).first()
        is not None
    )


def end_use(engine: Engine, use: Use) -> None:
    """Give the leases back: a workload's own lease ends with its last user unless a deployment keeps it."""
    with session_scope(engine) as s:
        _lock(s)
        for lid in use.lease_ids:
            lease = s.get(Lease, lid)
            if lease is None or lease.released_at is not None:
                continue
            lease.users = max(lease.users - 1, 0)
            s.add(lease)
            if lease.auto and lease.users == 0 and not _pinned(s, lid):
                end(s, lease, "released", f"end of {use.purpose}"[:255])


def pin(session: Session, use: Use, deployment: Deployment) -> None:
    """The deployment keeps its device's lease while it runs (set before it becomes ``running``)."""
    deployment.lease_id = use.lease_for(deployment.device_name)
    session.add(deployment)


def unpin(session: Session, deployment: Deployment) -> None:
    """A deployment ended: its own lease ends with it when nobody else uses it; a caller's runs its TTL again."""
    if not deployment.lease_id:
        return
    lease = session.get(Lease, deployment.lease_id)
    if lease is None or lease.released_at is not None:
        return
    others = session.exec(
        select(Deployment.id).where(
            Deployment.lease_id == lease.id,
            Deployment.id != deployment.id,
            Deployment.state == DeploymentState.RUNNING,
        )
    ).first()
    if others is not None:
        return
    if lease.auto and lease.users == 0:
        end(session, lease, "released", f"end of deployment {deployment.run_id}")
        return
    now = utcnow()
    lease.heartbeat_at, lease.expires_at = now, now + timedelta(seconds=lease.ttl_s)
    session.add(lease)


class Heartbeat:
    """Renews leases every third of their TTL from a daemon thread; an ended lease sets ``use.lost``."""

    def __init__(
        self, engine: Engine, use: Use, ttls: dict[str, float], on_lost: Callable[[str], None] | None = None
    ):
        self.engine, self.use, self.on_lost = engine, use, on_lost
        self.period = max(min(ttls.values(), default=60.0) / 3.0, 0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"lease-heartbeat-{use.purpose[:20]}", daemon=True
        )

    def start(self) -> Heartbeat:
        if self.use.lease_ids:
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            for lid in self.use.lease_ids:
                try:
                    ok = renew(self.engine, lid)
                except Exception:  # noqa: BLE001 - a database hiccup: retry next period, the TTL covers it
                    continue
                if not ok and not self.use.lost.is_set():
                    with session_scope(self.engine, write=False) as s:
                        lease = s.get(Lease, lid)
                        why = (
                            f"lease {lid} ended ({lease.end_reason}: {lease.ended_by})"
                            if lease
                            else f"lease {lid} is gone"
                        )
                    self.use.lost_reason = why
                    self.use.lost.set()
                    if self.on_lost:
                        self.on_lost(why)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


def ttls_of(engine: Engine, use: Use) -> dict[str, float]:
    with session_scope(engine, write=False) as s:
        return {lid: s.get(Lease, lid).ttl_s for lid in use.lease_ids}


@contextmanager
def held(
    engine: Engine,
    devices: list[str],
    purpose: str,
    *,
    lease_id: str | None = None,
    on_lost: Callable[[str], None] | None = None,
    ttl_s: float | None = None,
) -> Iterator[Use]:
    """Run a block under leases on ``devices``, renewed while it runs, given back after."""
    use = begin_use(engine, devices, purpose, lease_id=caller_lease(lease_id), ttl_s=ttl_s)
    beat = Heartbeat(engine, use, ttls_of(engine, use), on_lost).start()
    try:
        yield use
    finally:
        beat.stop()
        end_use(engine, use)


def covered(session: Session, lease_id: str) -> list[str]:
    return [row.device_name for row in devices_of(session, lease_id)]
