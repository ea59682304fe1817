"""Memory admission: a ledger of named pools per device; a plan reserves all of its pools or nothing.

Capacities come from the latest probe's facts through the deploy profile (unified memory is one
pool, never counted twice); the class headroom is taken off each capacity. Reservations of
deployments still running on the device count. ``admit`` runs inside the caller's write
transaction, so checking and reserving are one atomic step for every process sharing the database.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import select as sa_select
from sqlmodel import Session

from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.refusal import Refusal
from edgelab.profile import DeployProfile
from edgelab.store.deployments import Deployment, Reservation, open_reservations
from edgelab.store.models import Device

GIB = 1024**3


@dataclass
class PoolLine:
    pool: str
    capacity: int  # pool total - class headroom
    total: int
    headroom: int
    reserved: int  # by deployments already holding it
    requested: int = 0

    @property
    def fits(self) -> bool:
        return self.reserved + self.requested <= self.capacity

    def text(self) -> str:
        return (f"{self.pool}: {self.reserved / GIB:.2f} GiB reserved + {self.requested / GIB:.2f} GiB requested "
                f"{'<=' if self.fits else '>'} {self.capacity / GIB:.2f} GiB capacity")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fits": self.fits, "text": self.text()}


def ledger(session: Session, device: Device, profile: DeployProfile) -> dict[str, PoolLine]:
    """Every named pool of the device with its capacity and what is reserved now."""
    headroom = profile.defaults.headroom_bytes
    lines = {p.name: PoolLine(p.name, max(p.total_bytes - headroom, 0), p.total_bytes, headroom, 0)
             for p in profile.pools}
    bp = profile.budget_pool
    if bp is not None and bp.name not in lines:
        lines[bp.name] = PoolLine(bp.name, max(bp.total_bytes - headroom, 0), bp.total_bytes, headroom, 0)
    for r in open_reservations(session, device.id):
        line = lines.get(r.pool) or lines.setdefault(r.pool, PoolLine(r.pool, r.capacity, r.capacity, 0, 0))
        line.reserved += r.bytes
    return lines


def check(session: Session, device: Device, profile: DeployProfile, plan: ExecutionPlan) -> list[PoolLine]:
    """The plan's pools with the request filled in; raises Refusal naming the first pool that does not fit."""
    lines = ledger(session, device, profile)
    if not plan.memory:
        raise Refusal("budget_exceeds_device", "no memory pool is known for this device", device=device.name,
                      remedy=f"run `edgelab probe {device.name}` so its memory is known")
    out = []
    for pool, req in plan.memory.items():
        line = lines.get(pool)
        if line is None:
            raise Refusal("budget_exceeds_device", f"pool {pool} is not in the device's latest facts",
                          device=device.name, pool=pool, remedy=f"run `edgelab probe {device.name}`")
        line.requested = req
        out.append(line)
    for line in out:
        if not line.fits:
            d = plan.memory_detail
            parts = f" (weights {d.get('weights', 0) / GIB:.2f} GiB {d.get('quantization')}, activations " \
                    f"{d.get('activations', 0) / GIB:.2f}, KV {d.get('kv', 0) / GIB:.2f})" if d else ""
            running = " by running deployments" if line.reserved else ""
            raise Refusal("budget_exceeds_device", line.text() + parts, device=device.name, pool=line.pool,
                          numbers=line.to_dict(), strategy=plan.strategy,
                          remedy=(f"stop deployments on {device.name} (`edgelab ps`)" if line.reserved and
                                  line.requested <= line.capacity else
                                  "choose a smaller pipeline variant or a device with more memory; "
                                  "no smaller model is substituted silently") + running)
    return out


def admit(session: Session, device: Device, profile: DeployProfile, plan: ExecutionPlan,
          deployment: Deployment) -> list[PoolLine]:
    """Check and reserve every pool of the plan in the caller's write transaction (all or nothing)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(sa_select(Device.__table__.c.id).where(Device.__table__.c.id == device.id).with_for_update())
    lines = check(session, device, profile, plan)
    for line in lines:
        session.add(Reservation(deployment_id=deployment.id, device_id=device.id, pool=line.pool,
                                bytes=line.requested, capacity=line.capacity))
    session.flush()
    return lines
