"""One device as its page shows it: the inventory record, grouped facts of the newest successful
probe, the deploy profile derived from them, probe-history series, its store's blobs and its runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from edgelab.errors import EdgelabError
from edgelab.inventory.view import address_of
from edgelab.labels import strategy_label
from edgelab.store.db import session_scope
from edgelab.units import gib, human_bytes, when
from edgelab.views.fleet import max_temperature
from edgelab.views.trend import TrendView, load_trend

SNAPSHOT_HISTORY = 30  # probe snapshots behind the device telemetry sparklines


@dataclass(frozen=True)
class Section:
    """A listing on the device page (its store's blobs, its runs): one dict per row."""

    rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class DeviceDetail:
    name: str
    device: dict[str, Any]
    virtual: bool
    snapshot: dict[str, Any] | None  # meta of the newest successful probe
    facts: dict[str, list[tuple[str, str]]]  # group -> (key, value)
    profile: dict[str, Any] | None
    profile_note: str | None
    telemetry: dict[str, list[float]]  # series name -> values, oldest first
    artifacts: Section
    runs: Section
    trend: TrendView | None = None  # the headline metric over the last runs, with the baseline's line


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ", ".join(_fmt(v) for v in value) if value else "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in value.items()) if value else "-"
    return str(value)


def _gib(n: Any) -> str:
    return gib(n or None) if isinstance(n, int | float) else "-"


def group_facts(facts: dict[str, Any] | None) -> dict[str, list[tuple[str, str]]]:
    """Facts grouped for reading: identity, os, cpu, memory, accelerators, power; nulls left out."""
    out: dict[str, list[tuple[str, str]]] = {}
    if not facts:
        return out
    for group in ("identity", "os", "cpu"):
        items = []
        for k, v in (facts.get(group) or {}).items():
            if v in (None, [], {}, "") or k == "raw_flags":
                continue
            items.append((k, _fmt(v)))
        if items:
            out[group] = items
    mem = facts.get("memory") or {}
    items = [
        (p.get("kind") + (f" {p['device']}" if p.get("device") else ""), _gib(p.get("total_bytes")))
        for p in mem.get("pools") or []
        if p.get("total_bytes")
    ]
    if mem.get("unified") is not None:
        items.append(("unified", _fmt(mem["unified"])))
    if items:
        out["memory"] = items
    accels = []
    for a in facts.get("accelerators") or []:
        label = a.get("name") or a.get("kind") or "?"
        extra = [
            x
            for x in (a.get("kind"), a.get("compute_capability"), _gib(a.get("memory_bytes")))
            if x and x != "-"
        ]
        accels.append((label, " ".join(str(x) for x in extra) or "-"))
    if accels:
        out["accelerators"] = accels
    power = facts.get("power") or {}
    items = [(f"temp {k}", f"{v:g} C") for k, v in sorted((power.get("temperatures_c") or {}).items())]
    items += [(f"rail {k}", f"{v:g} mW") for k, v in sorted((power.get("rails_mw") or {}).items())]
    for k in ("power_mode", "battery"):
        if power.get(k) not in (None, {}, ""):
            items.append((k, _fmt(power[k])))
    if items:
        out["power"] = items
    return out


def _telemetry(snaps: list[Any]) -> dict[str, list[float]]:
    """Series from the probe history (oldest first): hottest sensor and available memory."""
    series: dict[str, list[float]] = {"temperature C": [], "available GiB": []}
    for snap in reversed(snaps):
        if not snap.ok or not snap.facts:
            continue
        t = max_temperature(snap.facts)
        if t is not None:
            series["temperature C"].append(t)
        pools = (snap.facts.get("memory") or {}).get("pools") or []
        avail = next((p.get("total_bytes") for p in pools if p.get("kind") == "available"), None)
        if avail:
            series["available GiB"].append(round(avail / 1024**3, 2))
    return {k: v for k, v in series.items() if v}


def list_run_rows(engine: Engine, device: str | None = None, limit: int = 500) -> list[dict[str, Any]]:
    """Runs, newest first, of one device or of the whole fleet: every one can be opened."""
    from edgelab.store.runs import list_runs

    with session_scope(engine, write=False) as s:
        return [
            {**run_row(r), "runtime": r.runtime or "-", "kind": r.kind}
            for r in list_runs(s, limit=limit, device=device)
        ]


def run_row(run: Any) -> dict[str, Any]:
    """The fields of a run every listing of runs shows."""
    return {
        "id": run.id,
        "device": run.device_name,
        "pipeline": run.pipeline,
        "strategy": strategy_label(run.strategy, run.runtime),
        "state": run.state,
        "started_at": run.started_at or run.created_at,
        "started": when(run.started_at or run.created_at),  # local, readable
        "virtual": bool(run.virtual),
    }


def load_device(engine: Engine, name: str, *, pipeline: str | None = None) -> DeviceDetail:
    """Everything the device page shows; NotFound for an unknown name."""
    from edgelab.profile import profile_from_facts
    from edgelab.store.artifacts import device_blobs
    from edgelab.store.devices import get_device
    from edgelab.store.runs import list_runs
    from edgelab.store.snapshots import snapshot_history

    with session_scope(engine, write=False) as s:
        d = get_device(s, name)
        snaps = snapshot_history(s, d.id, limit=SNAPSHOT_HISTORY)
        device = {
            "name": d.name,
            "class": d.device_class,
            "transport": d.transport,
            "address": address_of(d),
            "state": d.state,
            "detail": d.state_detail,
            "last_seen": d.last_seen,
            "tags": list(d.tags or []),
            "notes": d.notes,
        }
        virtual = bool(d.virtual)
        artifacts = Section(
            [
                {
                    "name": ", ".join(names) or "(unregistered blob)",
                    "sha256": e.sha256[:16],
                    "size": human_bytes(e.size),
                    "pushed": when(e.verified_at, seconds=False),
                }
                for e, names in device_blobs(s, d.id)
            ]
        )
        runs = Section([run_row(r) for r in list_runs(s, device=name, limit=10)])
    ok = next((x for x in snaps if x.ok), None)
    snapshot = None
    profile = None
    note = None
    if ok is None:
        note = f"no successful probe yet: press p (or run `edgelab probe {name}`)"
    else:
        snapshot = {
            "id": ok.id,
            "taken_at": ok.taken_at,
            "facts_hash": ok.facts_hash,
            "entry": ok.catalog_entry,
            "class": ok.device_class,
            "virtual": ok.virtual,
        }
        try:
            profile = profile_from_facts(ok.facts or {}, pipeline)
        except EdgelabError as err:
            note = f"no deploy profile: {err}"
        except Exception as err:  # noqa: BLE001 - a profile bug must not take the page down
            note = f"no deploy profile: {type(err).__name__}: {err}"
    return DeviceDetail(
        name=name,
        device=device,
        virtual=virtual,
        snapshot=snapshot,
        facts=group_facts(ok.facts if ok else None),
        profile=profile,
        profile_note=note,
        telemetry=_telemetry(snaps),
        artifacts=artifacts,
        runs=runs,
        trend=load_trend(engine, name),
    )
