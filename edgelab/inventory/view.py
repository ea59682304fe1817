"""How a device row is shown: one address string, a JSON-ready record, a relative "last seen"."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from edgelab.transport.address import display_address

if TYPE_CHECKING:  # the table class costs more to import than a listing takes; see store/quickread.py
    from edgelab.store.models import Device


def address_of(d: Device) -> str:
    """``user@host:port via jump`` for SSH, ``serial @ server`` for ADB, ``local`` for the lab host."""
    return display_address(d)


def device_record(d: Device, columns: Sequence[str] | None = None) -> dict:
    """Every column plus the display address; datetimes in ISO 8601 (UTC).

    ``columns`` names them for a row read without the ORM (``store.quickread``); by default
    they are the table's, in table order, stable for readers and diffs.
    """
    if columns is None:
        from edgelab.store.models import Device

        columns = [c.name for c in Device.__table__.columns]
    rec = {"name": d.name, "class": d.device_class, "transport": d.transport, "address": address_of(d)}
    for name in columns:
        if name in ("id", "name", "device_class", "transport"):
            continue
        value = getattr(d, name)
        rec[name] = value.isoformat() if isinstance(value, datetime) else value
    return rec


def ago(when: datetime | None, now: datetime | None = None) -> str:
    if when is None:
        return "never"
    now = now or datetime.now(UTC)
    secs = max(0, int((now - when).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit} ago"
    return f"{secs}s ago"


def held_text(owner: str | None, ci_job: str | None = None, until: datetime | None = None) -> str:
    """Who holds a device, as every listing says it: ``alice@lab1 (gitlab job 7) until 12:45`` (UTC);
    empty when the device is free."""
    if not owner:
        return ""
    return owner + (f" ({ci_job})" if ci_job else "") + (f" until {until:%H:%M}" if until else "")
