"""The fleet as a table reads it: one row per device with its latest probe, hottest sensor and holder.

Read in three queries whatever the fleet size (devices, newest snapshots, leases) plus one for
the devices busy with a run; filtering and sorting are pure functions of the rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from edgelab.inventory.view import address_of, held_text
from edgelab.store.db import session_scope


def max_temperature(facts: dict[str, Any] | None) -> float | None:
    """The hottest sensor of a facts dict (probe snapshots keep power.temperatures_c)."""
    temps = ((facts or {}).get("power") or {}).get("temperatures_c") or {}
    values = [float(v) for v in temps.values() if isinstance(v, int | float)]
    return max(values) if values else None


@dataclass(frozen=True)
class FleetRow:
    """One line of the fleet table."""

    name: str
    device_class: str | None
    transport: str
    address: str
    state: str
    virtual: bool
    last_probe: datetime | None
    probe_ok: bool | None
    temperature_c: float | None
    tags: tuple[str, ...] = ()
    detail: str | None = None
    holder: str | None = None  # who leases it (owner, and CI job), None when free
    held_until: datetime | None = None

    @property
    def held(self) -> str:
        """``alice@lab1 (gitlab job 7) until 12:45``, or empty when free (as `device ls` says it)."""
        return held_text(self.holder, None, self.held_until) if self.holder and self.held_until else ""


def load_fleet(engine: Engine) -> list[FleetRow]:
    """Every device with its latest probe time and hottest sensor, ordered by name."""
    from edgelab.lease import holders_by_device
    from edgelab.store.devices import list_devices
    from edgelab.store.runs import busy_device_names
    from edgelab.store.snapshots import latest_per_device

    with session_scope(engine, write=False) as s:
        devices = list_devices(s)
        latest = latest_per_device(s)
        holders = holders_by_device(s, devices)
        busy = busy_device_names(s)
    rows = []
    for d in devices:
        taken, ok, facts = latest.get(d.id, (None, None, None))
        lease = holders.get(d.name)
        rows.append(
            FleetRow(
                name=d.name,
                device_class=d.device_class,
                transport=d.transport,
                address=address_of(d),
                state="busy" if d.name in busy and d.state == "online" else d.state,
                virtual=bool(d.virtual),
                last_probe=taken,
                probe_ok=ok,
                temperature_c=max_temperature(facts) if ok else None,
                tags=tuple(d.tags or ()),
                detail=d.state_detail,
                holder=held_text(lease.owner, lease.ci_job) if lease else None,
                held_until=lease.expires_at if lease else None,
            )
        )
    return rows


def filter_rows(rows: list[FleetRow], query: str) -> list[FleetRow]:
    """Rows whose name, class, transport, state, address or tags contain every word of ``query``."""
    words = query.lower().split()
    if not words:
        return list(rows)

    def hay(r: FleetRow) -> str:
        parts = [r.name, r.device_class or "", r.transport, r.state, r.address, " ".join(r.tags)]
        if r.holder:
            parts.append(r.holder)
        if r.virtual:
            parts.append("virtual")
        return " ".join(parts).lower()

    return [r for r in rows if all(w in hay(r) for w in words)]


SORT_KEYS = ("name", "class", "state", "last probe", "temperature")


def sort_rows(rows: list[FleetRow], key: str, reverse: bool = False) -> list[FleetRow]:
    """Sort by one of SORT_KEYS; unknown values (never probed, no sensor) always go last."""

    def value(r: FleetRow):
        if key == "class":
            return r.device_class
        if key == "state":
            return r.state
        if key == "last probe":
            return r.last_probe
        if key == "temperature":
            return r.temperature_c
        return r.name

    known = [r for r in rows if value(r) is not None]
    unknown = [r for r in rows if value(r) is None]
    known.sort(key=lambda r: (value(r), r.name), reverse=reverse)
    return known + sorted(unknown, key=lambda r: r.name)
