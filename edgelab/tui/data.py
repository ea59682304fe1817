"""What the TUI shows, read from the database as plain values (no Textual here).

Screens call these functions from worker threads, so the UI never waits on the database
or a device. Every function takes an Engine and returns frozen dataclasses or dicts the
screens only render. Parts whose source has not landed yet (runs, artifacts) say so with
``available=False`` instead of showing anything made up.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, func
from sqlmodel import select

from edgelab.errors import EdgelabError
from edgelab.inventory.view import address_of
from edgelab.store.db import session_scope
from edgelab.store.devices import get_device, list_devices
from edgelab.store.models import Device, ProbeSnapshot

LIVE_RUN_STATES = ("pending", "running")  # a device with such a run is busy
SNAPSHOT_HISTORY = 30  # probe snapshots behind the device telemetry sparklines


def optional_module(name: str):
    """A module another part of edgelab provides once it lands; None until then."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def max_temperature(facts: dict[str, Any] | None) -> float | None:
    """The hottest sensor of a facts dict (probe snapshots keep power.temperatures_c)."""
    temps = ((facts or {}).get("power") or {}).get("temperatures_c") or {}
    values = [float(v) for v in temps.values() if isinstance(v, int | float)]
    return max(values) if values else None


# ---------------------------------------------------------------- fleet


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


def _latest_snapshots(session, device_ids: list[int] | None = None) -> dict[int, tuple]:
    """device id -> (taken_at, ok, facts) of its newest snapshot, in two queries whatever the fleet size."""
    newest = select(ProbeSnapshot.device_id, func.max(ProbeSnapshot.id).label("sid")).group_by(
        ProbeSnapshot.device_id
    )
    if device_ids is not None:
        newest = newest.where(ProbeSnapshot.device_id.in_(device_ids))
    sub = newest.subquery()
    rows = session.exec(
        select(ProbeSnapshot.device_id, ProbeSnapshot.taken_at, ProbeSnapshot.ok, ProbeSnapshot.facts).join(
            sub, ProbeSnapshot.id == sub.c.sid
        )
    ).all()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def busy_devices(engine: Engine) -> set[str]:
    """Names of devices with a live run, once the runs store exists (empty until then)."""
    runs = optional_module("edgelab.store.runs")
    run = getattr(runs, "Run", None) if runs else None
    if run is None:
        return set()
    with session_scope(engine, write=False) as s:
        names = s.exec(select(run.device_name).where(run.state.in_(LIVE_RUN_STATES)).distinct()).all()
    return {n for n in names if n}


def load_fleet(engine: Engine) -> list[FleetRow]:
    """Every device with its latest probe time and hottest sensor, ordered by name."""
    from edgelab.lease import holders_by_device

    with session_scope(engine, write=False) as s:
        devices = list_devices(s)
        latest = _latest_snapshots(s)
        holders = holders_by_device(s, devices)
    busy = busy_devices(engine)
    rows = []
    for d in devices:
        taken, ok, facts = latest.get(d.id, (None, None, None))
        state = "busy" if d.name in busy and d.state == "online" else d.state
        rows.append(
            FleetRow(
                name=d.name,
                device_class=d.device_class,
                transport=d.transport,
                address=address_of(d),
                state=state,
                virtual=bool(d.virtual),
                last_probe=taken,
                probe_ok=ok,
                temperature_c=max_temperature(facts) if ok else None,
                tags=tuple(d.tags or ()),
                detail=d.state_detail,
                holder=(holders[d.name].owner + (f" ({holders[d.name].ci_job})" if holders[d.name].ci_job else ""))
                if d.name in holders else None,
                held_until=holders[d.name].expires_at if d.name in holders else None,
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


# ---------------------------------------------------------------- device


@dataclass(frozen=True)
class Section:
    """An optional part of the device page: rows when available, else why not."""

    available: bool
    rows: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None


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
    return f"{n / 1024**3:.1f} GiB" if isinstance(n, int | float) and n else "-"


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
        extra = [x for x in (a.get("kind"), a.get("compute_capability"), _gib(a.get("memory_bytes"))) if x and x != "-"]
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


def derive_profile_dict(facts: dict[str, Any], pipeline: str | None = None) -> dict[str, Any]:
    """The profile engineer's derive_profile over stored facts, as a plain dict."""
    from edgelab.catalog.devices import load_devices
    from edgelab.probe.facts import Facts
    from edgelab.profile import derive_profile

    return derive_profile(Facts.from_dict(facts), load_devices(), pipeline=pipeline).to_dict()


def _telemetry(snaps: list[ProbeSnapshot]) -> dict[str, list[float]]:
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


def _runs_section(engine: Engine, name: str) -> Section:
    runs = optional_module("edgelab.store.runs")
    fn = getattr(runs, "list_runs", None) if runs else None
    if fn is None:
        return Section(False, note="runs: not available yet (the runs store has not landed)")
    try:
        with session_scope(engine, write=False) as s:
            rows = fn(s, device=name, limit=10)
            return Section(True, [run_summary(r) for r in rows])
    except TypeError:
        return Section(False, note="runs: this edgelab's runs store cannot filter by device")
    except EdgelabError as err:
        return Section(False, note=f"runs: {err}")


def _artifacts_section(engine: Engine, name: str) -> Section:
    """Blobs verified in the device's store, named by the registered artifacts that hold them."""
    store = optional_module("edgelab.store.artifacts")
    if store is None or not hasattr(store, "DeviceStoreEntry"):
        return Section(False, note="artifacts: not available yet (the device store has not landed)")
    entry, afile, art = store.DeviceStoreEntry, store.ArtifactFile, store.Artifact
    with session_scope(engine, write=False) as s:
        device = get_device(s, name)
        entries = s.exec(select(entry).where(entry.device_id == device.id).order_by(entry.verified_at.desc())).all()
        names: dict[str, list[str]] = {}
        shas = [e.sha256 for e in entries]
        if shas:
            for sha, a_name, path in s.exec(
                select(afile.sha256, art.name, afile.path).join(art, art.id == afile.artifact_id)
                .where(afile.sha256.in_(shas))
            ).all():
                names.setdefault(sha, []).append(f"{a_name}/{path}")
        rows = [{"name": ", ".join(sorted(names.get(e.sha256, []))) or "(unregistered blob)",
                 "sha256": e.sha256[:16], "size": _size(e.size), "pushed": e.verified_at.strftime("%Y-%m-%d %H:%M")}
                for e in entries]
    return Section(True, rows)


def _size(n: int) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _as_dict(obj: Any) -> dict[str, Any]:
    if hasattr(obj, "model_dump"):
        return obj.model_dump()
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return dict(vars(obj))


def run_summary(run: Any) -> dict[str, Any]:
    """The fields of a run row every screen shows, whatever extra columns the store has."""
    d = run if isinstance(run, dict) else _as_dict(run)
    return {
        "id": d.get("id"),
        "device": d.get("device") or d.get("device_name"),
        "pipeline": d.get("pipeline"),
        "strategy": d.get("strategy"),
        "state": d.get("state"),
        "started_at": d.get("started_at") or d.get("created_at"),
        "virtual": bool(d.get("virtual")),
    }


def load_device(engine: Engine, name: str, *, pipeline: str | None = None) -> DeviceDetail:
    """Everything the device page shows; NotFound for an unknown name."""
    with session_scope(engine, write=False) as s:
        d = get_device(s, name)
        snaps = list(
            s.exec(
                select(ProbeSnapshot)
                .where(ProbeSnapshot.device_id == d.id)
                .order_by(ProbeSnapshot.taken_at.desc(), ProbeSnapshot.id.desc())
                .limit(SNAPSHOT_HISTORY)
            ).all()
        )
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
    ok = next((x for x in snaps if x.ok), None)
    snapshot = None
    profile = None
    note = None
    if ok is None:
        note = f"no successful probe yet: press p (or run `edgelab probe {name}`)"
    else:
        snapshot = {"id": ok.id, "taken_at": ok.taken_at, "facts_hash": ok.facts_hash,
                    "entry": ok.catalog_entry, "class": ok.device_class, "virtual": ok.virtual}
        try:
            profile = derive_profile_dict(ok.facts or {}, pipeline)
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
        artifacts=_artifacts_section(engine, name),
        runs=_runs_section(engine, name),
    )


def device_names(engine: Engine) -> list[str]:
    with session_scope(engine, write=False) as s:
        return list(s.exec(select(Device.name).order_by(Device.name)).all())


# ---------------------------------------------------------------- matrix


@dataclass(frozen=True)
class EvidenceRun:
    """A run a matrix cell cites; ``virtual`` when the run or its device is virtual."""

    id: str
    device: str | None
    pipeline: str | None
    state: str  # a run state, or "missing" when the row is gone
    virtual: bool
    created_at: datetime | None
    demo: bool  # kept as demonstration evidence only (cell.demo_evidence)


@dataclass(frozen=True)
class MatrixCellView:
    """One cell of the qualification matrix as the Matrix screen shows it.

    ``qualified`` is true only when the stage says so AND a real-device run backs it;
    ``virtual_only`` marks cells whose every cited run is virtual (shown "(v)").
    """

    id: str
    row: int
    row_key: str
    row_label: str
    col: int
    pipeline: str
    col_label: str
    stage: str
    functional: str | None
    performance: str | None
    failing_layer: str | None
    reason: str | None
    next_experiment: str | None
    evidence: tuple[EvidenceRun, ...]
    updated_at: datetime | None
    updated_by: str | None
    virtual_only: bool
    qualified: bool


def _evidence_runs(session, ids: set[str]) -> dict[str, EvidenceRun]:
    """run id -> EvidenceRun (without the demo flag) in two queries, virtual judged by run and device."""
    from edgelab.store.runs import Run

    if not ids:
        return {}
    runs = session.exec(select(Run).where(Run.id.in_(sorted(ids)))).all()
    names = {r.device_name for r in runs if r.device_name}
    virtual_devices = set(
        session.exec(select(Device.name).where(Device.name.in_(sorted(names)), Device.virtual == True)).all()  # noqa: E712
    ) if names else set()
    return {r.id: EvidenceRun(id=r.id, device=r.device_name, pipeline=r.pipeline, state=r.state,
                              virtual=bool(r.virtual) or r.device_name in virtual_devices,
                              created_at=r.created_at, demo=False) for r in runs}


def load_matrix(engine: Engine) -> list[MatrixCellView]:
    """The 60 cells ordered by row then column, each with its evidence runs resolved.

    Seeds the study's 12 x 5 layout first when the table is empty (as `edgelab matrix` does).
    A run id that no longer resolves is listed with state "missing" and counts as not real.
    """
    from edgelab.matrix import matrix_rows
    from edgelab.store.matrix import list_cells

    with session_scope(engine, write=False) as s:
        cells = list_cells(s)
    if not cells:
        with session_scope(engine) as s:
            cells = matrix_rows(s)
    with session_scope(engine, write=False) as s:
        runs = _evidence_runs(s, {r for c in cells for r in [*c.evidence, *c.demo_evidence]})
    out = []
    for c in cells:
        ev: list[EvidenceRun] = []
        for rid, demo in [*((r, False) for r in c.evidence), *((r, True) for r in c.demo_evidence)]:
            run = runs.get(rid)
            if run is None:
                run = EvidenceRun(id=rid, device=None, pipeline=None, state="missing", virtual=False,
                                  created_at=None, demo=demo)
            ev.append(EvidenceRun(**{**run.__dict__, "demo": demo}))
        real = [e for e in ev if not e.virtual and not e.demo and e.state != "missing"]
        out.append(MatrixCellView(
            id=c.id, row=c.row, row_key=c.row_key, row_label=c.row_label, col=c.col, pipeline=c.pipeline,
            col_label=c.col_label, stage=c.stage, functional=c.functional, performance=c.performance,
            failing_layer=c.failing_layer, reason=c.reason, next_experiment=c.next_experiment,
            evidence=tuple(ev), updated_at=c.updated_at, updated_by=c.updated_by,
            virtual_only=bool(ev) and not real and any(e.virtual for e in ev),
            qualified=c.stage == "qualified" and bool(real)))
    return out
