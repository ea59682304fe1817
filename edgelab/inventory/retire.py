"""Remove a device without orphans: refused while a deployment runs on it or a lease holds it.

A removed row takes its deployments with it (ON DELETE CASCADE), and ``stop`` can then no longer
reach their processes; so ``device rm`` refuses, naming what is in the way, and ``force`` stops
those deployments (verified, memory released) and ends the leases (recorded) before removing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Engine

from edgelab.errors import DeviceInUse
from edgelab.store.db import session_scope


@dataclass
class InUse:
    runs: list[str] = field(default_factory=list)
    leases: list[str] = field(default_factory=list)  # "L... (owner until ...)"
    lease_ids: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.runs or self.leases)


def in_use(engine: Engine, name: str) -> InUse:
    from edgelab.lease import holders_by_device, sweep
    from edgelab.lease.use import covered
    from edgelab.store.deployments import list_deployments
    from edgelab.store.devices import get_device

    with session_scope(engine) as s:
        sweep(s)
        device = get_device(s, name)
        out = InUse(runs=[d.run_id for d in list_deployments(s, active_only=True, device_id=device.id)])
        lease = holders_by_device(s, [device]).get(name)
        if lease is not None and name not in covered(s, lease.id):
            lease = (
                None  # another row of the same physical device is leased: removing this one orphans nothing
            )
        if lease is not None:
            out.leases.append(f"{lease.id} ({lease.owner} until {lease.expires_at:%H:%M:%S} UTC)")
            out.lease_ids.append(lease.id)
    return out


def remove(engine: Engine, name: str, *, force: bool = False, opts=None) -> InUse:
    """Remove ``name``; DeviceInUse unless nothing runs or holds it, or ``force`` ended those first."""
    from edgelab.deploy import supervise
    from edgelab.lease import release
    from edgelab.store.devices import remove_device

    busy = in_use(engine, name)
    if busy and not force:
        what = ([f"deployment(s) {', '.join(busy.runs)} running"] if busy.runs else []) + (
            [f"lease {', '.join(busy.leases)}"] if busy.leases else []
        )
        raise DeviceInUse(
            f"{name} is in use: {'; '.join(what)}",
            remedy=(
                f"stop them (`edgelab stop {busy.runs[0]}`)"
                if busy.runs
                else "release it (`edgelab release`)"
            )
            + f", or `edgelab device rm {name} --force` to stop and release first",
        )
    for run in busy.runs:
        supervise.stop(engine, run, opts=opts)
    for lid in busy.lease_ids:
        release(engine, lid, force=True)
    with session_scope(engine) as s:
        remove_device(s, name)
    return busy
