"""Take, renew, release and kick leases; expired ones are freed by whoever looks next.

Every change happens in one write transaction: on SQLite ``BEGIN IMMEDIATE`` (the store's
default) queues writers, on PostgreSQL a transaction-level advisory lock does; the unique
``held_key`` constraint is the backstop either way. There is no daemon: each call first ends
the leases whose holder stopped renewing (``sweep``), so a SIGKILLed holder or a cancelled CI
job frees its devices within the lease's TTL.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import Engine, exists, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from edgelab.errors import ConfigError, LeaseHeld, NotFound
from edgelab.lease.owner import Holder, whoami
from edgelab.lease.rules import (  # noqa: F401 - re-exported: the rules live apart, free of the ORM
    AUTO_TTL_S,
    auto_ttl,
    new_id,
    physical_key,
)
from edgelab.states import DeploymentState
from edgelab.store.db import session_scope
from edgelab.store.deployments import Deployment, Reservation
from edgelab.store.devices import get_device, list_devices
from edgelab.store.leases import Lease, LeaseDevice
from edgelab.store.models import Device, utcnow

PG_LOCK_KEY = 7150452  # pg_advisory_xact_lock key of lease writers (7150451 is the migration's)


def _lock(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"SELECT pg_advisory_xact_lock({PG_LOCK_KEY})"))


def _pinned_clause():
    """A running deployment keeps its lease: such a lease never expires until the deployment ends."""
    return exists().where(Deployment.lease_id == Lease.id, Deployment.state == DeploymentState.RUNNING)


def end(session: Session, lease: Lease, reason: str, by: str) -> Lease:
    now = utcnow()
    lease.released_at, lease.end_reason, lease.ended_by = now, reason, by[:255]
    session.add(lease)
    for row in session.exec(select(LeaseDevice).where(LeaseDevice.lease_id == lease.id)).all():
        row.held_key = None
        session.add(row)
    for r in session.exec(
        select(Reservation).where(
            Reservation.lease_id == lease.id,  # a dead bench's memory
            Reservation.deployment_id == None,  # noqa: E711
            Reservation.released_at == None,  # noqa: E711
        )
    ).all():
        r.released_at = now
        session.add(r)
    session.flush()
    return lease


def sweep(session: Session, now: datetime | None = None) -> list[Lease]:
    """End every open lease past its expiry that no running deployment keeps; returns them."""
    now = now or utcnow()
    stale = session.exec(
        select(Lease).where(
            Lease.released_at == None,  # noqa: E711
            Lease.expires_at < now,
            ~_pinned_clause(),
        )
    ).all()
    for lease in stale:
        end(session, lease, "expired", "expiry (its holder stopped renewing)")
    return list(stale)


def devices_of(session: Session, lease_id: str) -> list[LeaseDevice]:
    return list(
        session.exec(
            select(LeaseDevice).where(LeaseDevice.lease_id == lease_id).order_by(LeaseDevice.id)
        ).all()
    )


def open_holds(session: Session) -> dict[str, Lease]:
    """physical key -> the open lease holding it."""
    rows = session.exec(
        select(LeaseDevice, Lease).where(LeaseDevice.lease_id == Lease.id, LeaseDevice.held_key != None)  # noqa: E711
    ).all()
    return {ld.held_key: lease for ld, lease in rows}


def holders_by_device(session: Session, devices: list[Device] | None = None) -> dict[str, Lease]:
    """device name -> the open lease that holds it (expired ones counted as free); for listings."""
    now = utcnow()
    holds = open_holds(session)
    out = {}
    for d in devices if devices is not None else list_devices(session):
        lease = holds.get(physical_key(d))
        if lease is not None and (lease.expires_at > now or _is_pinned(session, lease)):
            out[d.name] = lease
    return out


def _is_pinned(session: Session, lease: Lease) -> bool:
    return (
        session.exec(
            select(Deployment.id).where(
                Deployment.lease_id == lease.id, Deployment.state == DeploymentState.RUNNING
            )
        ).first()
        is not None
    )


def mine(lease: Lease, holder: Holder) -> bool:
    return lease.owner == holder.owner and lease.ci_job == holder.ci_job


def held_text(name: str, lease: Lease, runs: list[str] | None = None, alias: str | None = None) -> str:
    who = f"{lease.owner} ({lease.ci_job})" if lease.ci_job else lease.owner
    if alias and alias != name:
        name = f"{name} (the same device as {alias})"
    what = f" for {lease.purpose!r}" if lease.purpose else ""
    until = (
        f"until deployment {', '.join(runs)} is stopped"
        if runs
        else f"until {lease.expires_at:%Y-%m-%d %H:%M:%S} UTC"
    )
    return f"{name} is leased to {who}{what} {until} (lease {lease.id})"


def held_error(
    name: str,
    lease: Lease,
    *,
    waited: float | None = None,
    runs: list[str] | None = None,
    alias: str | None = None,
) -> LeaseHeld:
    msg = held_text(name, lease, runs, alias) + (f"; waited {waited:.0f}s" if waited is not None else "")
    return LeaseHeld(
        msg,
        lease=lease,
        device=name,
        remedy=f"wait for it (`edgelab reserve {name} --wait`), ask {lease.owner}, or take it over "
        f"with `edgelab reserve --kick {name}` (recorded)",
    )


def _candidates(
    session: Session, names: list[str], tag: str | None, device_class: str | None
) -> list[Device]:
    if names:
        return [get_device(session, n) for n in names]
    rows = list_devices(session, tag=tag, device_class=device_class)
    if not rows:
        what = f"tag {tag!r}" if tag else f"class {device_class!r}" if device_class else "the inventory"
        raise NotFound(f"no device matches {what}", remedy="see `edgelab device ls`")
    return rows


def _take(
    session: Session,
    holder: Holder,
    names: list[str],
    tag: str | None,
    device_class: str | None,
    count: int | None,
    ttl_s: float,
    purpose: str,
    auto: bool,
    kicker: bool,
) -> Lease:
    lease_id = new_id()
    _lock(session)
    sweep(session)
    cands = _candidates(session, names, tag, device_class)
    holds = open_holds(session)
    picked: dict[str, Device] = {}  # physical key -> first row naming it
    for d in cands:
        key = physical_key(d)
        lease = holds.get(key)
        if lease is not None and names:
            if kicker:
                kick_lease(session, lease, d.name, holder, by_lease=lease_id)
                purpose = purpose or f"took {d.name} over from {lease.owner} (lease {lease.id})"
            else:
                raise held_error(
                    d.name, lease, runs=kept_by(session, lease.id), alias=_alias(session, lease, key)
                )
        elif lease is not None:
            continue
        picked.setdefault(key, d)
    if not names:
        want = count or 1
        if len(picked) < want:
            busy = [(d.name, holds[physical_key(d)]) for d in cands if physical_key(d) in holds]
            first = f"; {held_text(*busy[0])}" if busy else ""
            raise LeaseHeld(
                f"{len(picked)} of {want} wanted device(s) free among {len(cands)} matching{first}",
                lease=busy[0][1] if busy else None,
                device=busy[0][0] if busy else None,
                remedy="retry with --wait, ask for --count fewer, or see `edgelab leases`",
            )
        picked = dict(list(picked.items())[:want])
    return open_lease(
        session,
        lease_id=lease_id,
        holder=holder,
        purpose=purpose,
        auto=auto,
        ttl_s=ttl_s,
        devices=picked.items(),
    )


def open_lease(
    session: Session,
    *,
    lease_id: str,
    holder: Holder,
    purpose: str,
    auto: bool,
    ttl_s: int,
    devices: Iterable[tuple[str, Device]],
) -> Lease:
    """Write a new lease and a held row per physical device (``(physical key, device)`` pairs; a
    key seen twice, one device registered twice, is held once)."""
    now = utcnow()
    lease = Lease(
        id=lease_id,
        owner=holder.owner,
        ci_job=holder.ci_job,
        purpose=purpose[:255],
        auto=auto,
        ttl_s=ttl_s,
        acquired_at=now,
        heartbeat_at=now,
        expires_at=now + timedelta(seconds=ttl_s),
    )
    session.add(lease)
    session.flush()
    seen: set[str] = set()
    for key, d in devices:
        if key in seen:
            continue
        seen.add(key)
        session.add(
            LeaseDevice(lease_id=lease.id, device_id=d.id, device_name=d.name, physical_key=key, held_key=key)
        )
    session.flush()  # the unique held_key refuses a second open lease on any of these devices
    return lease


def kick_lease(session: Session, lease: Lease, device: str, by: Holder, by_lease: str | None = None) -> None:
    """End someone's lease on the operator's word; refused while a deployment of theirs runs under it."""
    dep = session.exec(
        select(Deployment).where(Deployment.lease_id == lease.id, Deployment.state == DeploymentState.RUNNING)
    ).first()
    if dep is not None:
        raise LeaseHeld(
            f"{device}: deployment {dep.run_id} runs under lease {lease.id} of {lease.owner}",
            lease=lease,
            device=device,
            remedy=f"stop it first (`edgelab stop {dep.run_id}`), then kick",
        )
    end(session, lease, "kicked", f"kicked by {by.label()}" + (f" (lease {by_lease})" if by_lease else ""))


def acquire(
    engine: Engine,
    *,
    names: list[str] | None = None,
    tag: str | None = None,
    device_class: str | None = None,
    count: int | None = None,
    ttl_s: float = 1800.0,
    purpose: str = "",
    holder: Holder | None = None,
    auto: bool = False,
    wait: bool = False,
    timeout_s: float | None = None,
    kick: bool = False,
    poll_s: float = 0.5,
) -> Lease:
    """One lease on every named device, or on ``count`` free devices of a tag/class; all or nothing.

    Refused (LeaseHeld, naming the holder and until when) when a device is taken; ``wait`` retries
    until one frees or ``timeout_s`` passes; ``kick`` ends the current holder's lease first.
    """
    if ttl_s <= 0:
        raise ConfigError("a lease needs a positive duration", remedy="pass e.g. --for 30m")
    if count is not None and count < 1:
        raise ConfigError("--count must be at least 1", remedy="pass e.g. --count 2")
    holder = holder or whoami()
    names = list(dict.fromkeys(names or []))
    t0 = time.monotonic()
    while True:
        try:
            with session_scope(engine) as s:
                return _take(s, holder, names, tag, device_class, count, ttl_s, purpose, auto, kick)
        except IntegrityError:
            continue  # another writer took a device between our look and our insert: look again
        except LeaseHeld as err:
            waited = time.monotonic() - t0
            if not wait or kick or (timeout_s is not None and waited >= timeout_s):
                if wait and err.lease is not None and err.device:
                    raise held_error(err.device, err.lease, waited=waited) from None
                raise
            left = None if timeout_s is None else timeout_s - waited
            time.sleep(poll_s if left is None else max(min(poll_s, left), 0.01))


def get_lease(session: Session, lease_id: str) -> Lease:
    lease = session.get(Lease, lease_id)
    if lease is None:
        raise NotFound(f"no lease {lease_id!r}", remedy="see `edgelab leases --all`")
    return lease


def renew(engine: Engine, lease_id: str) -> bool:
    """Push the expiry one TTL ahead; False when the lease already ended (expired, kicked, released)."""
    with session_scope(engine) as s:
        lease = s.get(Lease, lease_id)
        if lease is None or lease.released_at is not None:
            return False
        now = utcnow()
        if lease.expires_at < now and not _is_pinned(s, lease):
            end(s, lease, "expired", "expiry (renewed too late)")
            return False
        lease.heartbeat_at, lease.expires_at = now, now + timedelta(seconds=lease.ttl_s)
        s.add(lease)
        return True


def release(engine: Engine, lease_id: str, *, holder: Holder | None = None, force: bool = False) -> Lease:
    """End a lease of one's own (``force``: anyone's, recorded as a kick); refused while a deployment runs under it."""
    holder = holder or whoami()
    with session_scope(engine) as s:
        _lock(s)
        sweep(s)
        lease = get_lease(s, lease_id)
        if lease.released_at is not None:
            return lease
        if not mine(lease, holder) and not force:
            raise LeaseHeld(
                f"lease {lease.id} belongs to {lease.owner}" + (f" ({lease.ci_job})" if lease.ci_job else ""),
                lease=lease,
                remedy=f"ask {lease.owner}, or take its devices over with `edgelab reserve --kick`",
            )
        dep = s.exec(
            select(Deployment).where(
                Deployment.lease_id == lease.id, Deployment.state == DeploymentState.RUNNING
            )
        ).first()
        if dep is not None:
            raise LeaseHeld(
                f"deployment {dep.run_id} on {dep.device_name} runs under lease {lease.id}",
                lease=lease,
                remedy=f"stop it first: `edgelab stop {dep.run_id}`",
            )
        reason = "released" if mine(lease, holder) else "kicked"
        return end(
            s, lease, reason, f"{'released' if reason == 'released' else 'kicked'} by {holder.label()}"
        )


def kick(
    engine: Engine, names: list[str], *, ttl_s: float, purpose: str = "", holder: Holder | None = None
) -> Lease:
    """Take devices over from their holders (each kick recorded on the ended lease)."""
    return acquire(engine, names=names, ttl_s=ttl_s, purpose=purpose, holder=holder, kick=True)


def _alias(session: Session, lease: Lease, key: str) -> str | None:
    """The name under which the lease took this physical device (another inventory row for it)."""
    return next((r.device_name for r in devices_of(session, lease.id) if r.physical_key == key), None)


def kept_by(session: Session, lease_id: str) -> list[str]:
    """Run ids of the running deployments that keep this lease (it does not expire while they run)."""
    return list(
        session.exec(
            select(Deployment.run_id).where(
                Deployment.lease_id == lease_id, Deployment.state == DeploymentState.RUNNING
            )
        ).all()
    )


def list_leases(
    session: Session, *, include_ended: bool = False, limit: int = 200
) -> list[tuple[Lease, list[LeaseDevice]]]:
    """Open leases (or the latest ``limit`` including ended ones), newest first, with their devices."""
    query = select(Lease)
    if not include_ended:
        query = query.where(Lease.released_at == None)  # noqa: E711
    rows = session.exec(query.order_by(Lease.acquired_at.desc()).limit(limit)).all()
    return [(lease, devices_of(session, lease.id)) for lease in rows]
