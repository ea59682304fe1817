"""Probe devices: one batched collection per device, parsed into facts, classified, stored.

The probe service, kept above ``edgelab.probe`` (the pure collectors and parsers) because it
reaches devices, reads the catalog, classifies with ``edgelab.profile`` and writes the store.

``probe_device`` and ``probe_devices`` never let one device's failure escape as an exception:
a failed probe is stored too (ok=False, the error and its remedy), so history shows it, and the
device's state says why (offline, untrusted, auth-failed, error). Only an unknown device name
raises (NotFound). Database writes happen in the caller's thread, one short transaction each.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from edgelab import __version__
from edgelab.errors import (
    DeviceStateError,
    EdgelabError,
    HostKeyError,
    RemoteTimeout,
    SSHAuthError,
    TransportError,
)
from edgelab.logs import swallowed
from edgelab.probe.collectors import Collection, collector_for, get_collector, parse_sections, run_collector
from edgelab.probe.collectors.sections import Section
from edgelab.probe.facts import Facts
from edgelab.store.db import session_scope
from edgelab.store.devices import get_device, list_devices, record_state
from edgelab.store.models import Device, ProbeSnapshot
from edgelab.store.snapshots import add_snapshot, facts_hash
from edgelab.transport.base import Endpoint

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
PER_SOURCE_TIMEOUT_S = 3.0
CONNECT_TIMEOUT_S = 10.0


@dataclass
class ProbeOutcome:
    """What ``probe_devices`` reports per device (the stored snapshot, or why there is none)."""

    name: str
    snapshot: ProbeSnapshot | None
    error: str | None = None
    remedy: str | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.snapshot is not None and self.snapshot.ok


@dataclass
class _Gathered:
    """The network half of a probe, done in a worker thread; nothing here touches the database."""

    family: str
    collection: Collection | None = None
    facts: Facts | None = None
    classification: dict[str, Any] | None = None
    error: EdgelabError | None = None
    warnings: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    taken_at: datetime = field(default_factory=lambda: datetime.now(UTC))


# ---------------------------------------------------------------- pure parts


def facts_from_raw(raw: dict[str, Any]) -> Facts:
    """Re-parse a stored snapshot's raw outputs with this edgelab's parsers."""
    collector = get_collector(str(raw.get("family", "linux")))
    sections = {n: Section.from_dict(s) for n, s in (raw.get("sections") or {}).items()}
    return parse_sections(collector, sections)


@functools.lru_cache(maxsize=4)
def _catalog(path: str | None):
    from edgelab.catalog.devices import load_devices

    return load_devices(path)


def classify_facts(facts: Facts, catalog_path: str | None = None) -> tuple[dict[str, Any] | None, list[str]]:
    """The catalog classification as a dict (entry, class, reasons...), or None and why not."""
    try:
        from edgelab.profile.classify import classify

        return classify(facts, _catalog(catalog_path)).to_dict(), []
    except EdgelabError as err:
        return None, [f"not classified: {err}"]


def _state_for(err: EdgelabError) -> str:
    if isinstance(err, HostKeyError):
        return "untrusted"
    if isinstance(err, SSHAuthError):
        return "auth-failed"
    if isinstance(err, DeviceStateError):
        text = str(err).lower()
        return next((s for s in ("unauthorized", "absent", "offline") if s in text), "offline")
    if isinstance(err, RemoteTimeout):
        return "error"
    if isinstance(err, TransportError):
        return "offline"
    return "error"


# ---------------------------------------------------------------- the network half


def gather(
    endpoint: Endpoint,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    ssh_config: str | None = None,
    catalog_path: str | None = None,
) -> _Gathered:
    """Connect, run the family's collector once, parse and classify; errors are returned, not raised."""
    from edgelab.transport import open_transport

    collector = collector_for(endpoint)
    out = _Gathered(family=collector.family)
    start = time.monotonic()
    transport = None
    try:
        transport = open_transport(endpoint, timeout=min(CONNECT_TIMEOUT_S, timeout), ssh_config=ssh_config)
        out.collection = run_collector(
            collector, transport, timeout=timeout, per_source_timeout=min(PER_SOURCE_TIMEOUT_S, timeout)
        )
        out.warnings.extend(out.collection.warnings)
        if not out.collection.sections:
            out.error = TransportError(
                f"{endpoint.name}: the probe printed nothing usable (exit {out.collection.exit_code})",
                remedy=f"run `edgelab device check {endpoint.name}`; see the snapshot's raw stderr",
            )
        else:
            out.facts = parse_sections(collector, out.collection.sections)
            out.classification, notes = classify_facts(out.facts, catalog_path)
            out.warnings.extend(notes)
    except EdgelabError as err:
        out.error = err
    except Exception as err:  # noqa: BLE001 - one device's surprise must not stop the fleet
        out.error = EdgelabError(
            f"{endpoint.name}: {type(err).__name__}: {err}", remedy="report this as a bug"
        )
    finally:
        if transport is not None:
            with swallowed(log, "closing the device connection"):
                transport.close()
    out.duration_s = time.monotonic() - start
    return out


# ---------------------------------------------------------------- the database half


def _store(session: Session, device: Device, got: _Gathered) -> ProbeSnapshot:
    facts_dict = got.facts.to_dict() if got.facts is not None else None
    cls = got.classification or {}
    warnings = list(got.warnings) + (list(got.facts.warnings) if got.facts else [])
    snap = ProbeSnapshot(
        device_id=device.id,
        device_name=device.name,
        taken_at=got.taken_at,
        duration_s=round(got.duration_s, 4),
        edgelab_version=__version__,
        family=got.family,
        ok=got.error is None,
        error=None if got.error is None else _one_line(got.error),
        raw=got.collection.raw() if got.collection else {"family": got.family, "sections": {}},
        facts=facts_dict,
        facts_hash=facts_hash(facts_dict) if facts_dict is not None else None,
        device_class=cls.get("class"),
        catalog_entry=cls.get("entry"),
        classification=got.classification,
        warnings=warnings,
        virtual=bool(device.virtual),
    )
    if got.error is None:
        record_state(session, device.name, "online", None)
        if snap.device_class and device.device_class != snap.device_class:
            if device.device_class:
                snap.warnings.append(
                    f"inventory says class {device.device_class}, the probe says {snap.device_class}; "
                    "inventory updated"
                )
            device.device_class = snap.device_class
            session.add(device)
    else:
        record_state(session, device.name, _state_for(got.error), snap.error)
    return add_snapshot(session, snap)


def _one_line(err: EdgelabError) -> str:
    remedy = getattr(err, "remedy", None)
    return f"{err}" + (f" (-> {remedy})" if remedy else "")


def probe_device(
    target: Engine | Session,
    name: str,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    ssh_config: str | None = None,
    catalog_path: str | None = None,
) -> ProbeSnapshot:
    """Probe one device and store the snapshot (check ``.ok``); NotFound for an unknown name."""
    if isinstance(target, Session):
        device = get_device(target, name)
        got = gather(device.endpoint(), timeout=timeout, ssh_config=ssh_config, catalog_path=catalog_path)
        return _store(target, get_device(target, name), got)
    with session_scope(target, write=False) as s:
        endpoint = get_device(s, name).endpoint()
    got = gather(endpoint, timeout=timeout, ssh_config=ssh_config, catalog_path=catalog_path)
    with session_scope(target) as s:
        return _store(s, get_device(s, name), got)


def probe_devices(
    engine: Engine,
    names: Sequence[str] | None = None,
    *,
    parallel: int = 16,
    timeout: float = DEFAULT_TIMEOUT_S,
    ssh_config: str | None = None,
    catalog_path: str | None = None,
    on_progress: Callable[[ProbeOutcome], None] | None = None,
) -> list[ProbeOutcome]:
    """Probe ``names`` (None: every device) with up to ``parallel`` at once, in input order.

    ``on_progress`` runs in the caller's thread as each device finishes. Unknown names raise
    NotFound before anything is probed.
    """
    with session_scope(engine, write=False) as s:
        devices = list_devices(s) if names is None else [get_device(s, n) for n in dict.fromkeys(names)]
        targets = [(d.name, d.endpoint()) for d in devices]
    outcomes: dict[str, ProbeOutcome] = {}
    if not targets:
        return []
    with ThreadPoolExecutor(
        max_workers=max(1, min(parallel, len(targets))), thread_name_prefix="probe"
    ) as pool:
        futures = {
            pool.submit(gather, ep, timeout=timeout, ssh_config=ssh_config, catalog_path=catalog_path): name
            for name, ep in targets
        }
        for fut in as_completed(futures):
            name = futures[fut]
            got = fut.result()  # gather() returns errors, it does not raise them
            try:
                with session_scope(engine) as s:
                    snap = _store(s, get_device(s, name), got)
                outcome = ProbeOutcome(
                    name, snap, snap.error, getattr(got.error, "remedy", None), got.duration_s
                )
            except EdgelabError as err:  # e.g. the device was removed meanwhile
                outcome = ProbeOutcome(name, None, str(err), err.remedy, got.duration_s)
            outcomes[name] = outcome
            if on_progress is not None:
                on_progress(outcome)
    return [outcomes[name] for name, _ in targets]
