"""Memory admission: a ledger of named pools per device; a plan reserves all of its pools or nothing.

Capacities come from the latest probe's facts through the deploy profile (unified memory is one
pool, never counted twice); the class headroom is taken off each capacity. Reservations of
deployments still running on the device count. ``admit`` runs inside the caller's write
transaction, so checking and reserving are one atomic step for every process sharing the database.
``deploy`` and ``bench`` (and so a playbook's bench steps) go through the same ledger.

A plan reserves every pool it uses (:func:`pool_requests`): on a discrete GPU the model in that
GPU's VRAM plus the process's host share in RAM (the WSL quota inside WSL) and, on Windows, the
commit limit; a CPU or NPU plan reserves no VRAM; unified memory is one RAM pool. A plan that
tells vLLM to take a fraction of the memory (``--gpu-memory-utilization``) reserves that fraction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from edgelab.deploy.plan import ExecutionPlan
from edgelab.errors import Refusal, RefusalCode
from edgelab.profile import DeployProfile
from edgelab.store.deployments import Deployment, Reservation, open_reservations
from edgelab.store.models import Device
from edgelab.units import GIB

HOST_SHARE = 512 * 1024**2  # runtime, tokenizer and staging buffers in host RAM while a GPU holds the model
GPU_PLACEMENTS = ("gpu",)


def _vllm_fraction(plan: ExecutionPlan) -> float | None:
    for proc in plan.processes:
        argv = proc.argv
        for i, a in enumerate(argv):
            if a == "--gpu-memory-utilization" and i + 1 < len(argv):
                return float(argv[i + 1])
            if a.startswith("--gpu-memory-utilization="):
                return float(a.split("=", 1)[1])
    return None


def pool_requests(plan: ExecutionPlan, profile: DeployProfile) -> tuple[dict[str, int], dict[str, str]]:
    """The plan's bytes per pool, and why each pool is in it.

    ``plan.memory`` holds the strategy's request (weights + activations + KV) in the profile's
    budget pool; this spreads it over the pools the plan really uses.
    """
    total = sum(plan.memory.values())
    if not total:
        return dict(plan.memory), {}
    pools = {p.name: p for p in profile.pools}
    bp = profile.budget_pool
    if bp is not None:
        pools.setdefault(bp.name, bp)
    host: str | None = next((n for n in ("wsl_quota", "ram") if n in pools), None)
    if host is None and bp is not None and bp.kind != "vram":
        host = bp.name
    vram = sorted((p for p in pools.values() if p.kind == "vram"), key=lambda p: p.total_bytes, reverse=True)
    on_gpu = any(st.placement in GPU_PLACEMENTS for st in plan.stages)
    out: dict[str, int] = {}
    why: dict[str, str] = {}
    if on_gpu and vram:
        gpu = bp if bp is not None and bp.kind == "vram" else vram[0]
        out[gpu.name] = total
        why[gpu.name] = "the model (weights, activations, KV) in this GPU's memory"
        if host:
            out[host] = min(HOST_SHARE, total)
            why[host] = f"the process's host share ({HOST_SHARE // 1024**2} MiB) beside the GPU"
    else:
        target = host or (bp.name if bp is not None else next(iter(plan.memory)))
        out[target] = total
        why[target] = (
            "unified memory: one pool for CPU, GPU and NPU"
            if on_gpu
            else "CPU/NPU plan: the model in host memory, no VRAM reserved"
        )
    frac = _vllm_fraction(plan)
    if frac is not None:
        target = next(iter(out))
        cap = pools[target].total_bytes if target in pools else 0
        if cap:
            out[target] = int(frac * cap)
            why[target] = f"vLLM takes --gpu-memory-utilization {frac:g} of {target}"
    if "commit" in pools and host and host in out:
        out["commit"] = out[host]
        why["commit"] = "Windows: the process's private bytes count against the commit limit"
    return out, why


def spread(plan: ExecutionPlan, profile: DeployProfile) -> ExecutionPlan:
    """Rewrite ``plan.memory`` to every pool it uses (idempotent: the budget request is kept in the detail)."""
    if "budget_request" in plan.memory_detail:
        return plan
    plan.memory_detail["budget_request"] = dict(plan.memory)
    plan.memory, why = pool_requests(plan, profile)
    plan.memory_detail["pools"] = why
    return plan


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
        return (
            f"{self.pool}: {self.reserved / GIB:.2f} GiB reserved + {self.requested / GIB:.2f} GiB requested "
            f"{'<=' if self.fits else '>'} {self.capacity / GIB:.2f} GiB capacity"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fits": self.fits, "text": self.text()}


def ledger(session: Session, device: Device, profile: DeployProfile) -> dict[str, PoolLine]:
    """Every named pool of the device with its capacity and what is reserved now."""
    headroom = profile.defaults.headroom_bytes
    lines = {
        p.name: PoolLine(p.name, max(p.total_bytes - headroom, 0), p.total_bytes, headroom, 0)
        for p in profile.pools
    }
    bp = profile.budget_pool
    if bp is not None and bp.name not in lines:
        lines[bp.name] = PoolLine(bp.name, max(bp.total_bytes - headroom, 0), bp.total_bytes, headroom, 0)
    for r in open_reservations(session, device.pk):
        line = lines.get(r.pool) or lines.setdefault(r.pool, PoolLine(r.pool, r.capacity, r.capacity, 0, 0))
        line.reserved += r.bytes
    return lines


def check(session: Session, device: Device, profile: DeployProfile, plan: ExecutionPlan) -> list[PoolLine]:
    """The plan's pools with the request filled in; raises Refusal naming the first pool that does not fit."""
    lines = ledger(session, device, profile)
    if not plan.memory:
        raise Refusal(
            RefusalCode.BUDGET_EXCEEDS_DEVICE,
            "no memory pool is known for this device",
            device=device.name,
            remedy=f"run `edgelab probe {device.name}` so its memory is known",
        )
    out = []
    for pool, req in plan.memory.items():
        line = lines.get(pool)
        if line is None:
            raise Refusal(
                RefusalCode.BUDGET_EXCEEDS_DEVICE,
                f"pool {pool} is not in the device's latest facts",
                device=device.name,
                pool=pool,
                remedy=f"run `edgelab probe {device.name}`",
            )
        line.requested = req
        out.append(line)
    for line in out:
        if not line.fits:
            d = plan.memory_detail
            parts = (
                f" (weights {d.get('weights', 0) / GIB:.2f} GiB {d.get('quantization')}, activations "
                f"{d.get('activations', 0) / GIB:.2f}, KV {d.get('kv', 0) / GIB:.2f})"
                if d
                else ""
            )
            running = " (memory held by running deployments and benches)" if line.reserved else ""
            raise Refusal(
                RefusalCode.BUDGET_EXCEEDS_DEVICE,
                line.text() + parts,
                device=device.name,
                pool=line.pool,
                numbers=line.to_dict(),
                strategy=plan.strategy,
                remedy=(
                    f"stop deployments on {device.name} (`edgelab ps`) or wait for its bench runs"
                    if line.reserved and line.requested <= line.capacity
                    else "choose a smaller pipeline variant or a device with more memory; "
                    "no smaller model is substituted silently"
                )
                + running,
            )
    return out


def admit(
    session: Session,
    device: Device,
    profile: DeployProfile,
    plan: ExecutionPlan,
    deployment: Deployment | None = None,
    *,
    run_id: str | None = None,
    lease_id: str | None = None,
) -> list[PoolLine]:
    """Check and reserve every pool of the plan in the caller's write transaction (all or nothing).

    For a deployment, or for a bench run (``run_id``, no deployment); ``lease_id`` is the lease
    the workload runs under, so its memory is freed with the lease if the workload dies.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(sa_select(col(Device.id)).where(col(Device.id) == device.id).with_for_update())
    lines = check(session, device, profile, plan)
    for line in lines:
        session.add(
            Reservation(
                deployment_id=deployment.id if deployment else None,
                run_id=run_id,
                lease_id=lease_id,
                device_id=device.pk,
                pool=line.pool,
                bytes=line.requested,
                capacity=line.capacity,
            )
        )
    session.flush()
    return lines
