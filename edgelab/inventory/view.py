"""How a device row is shown: one address string, a JSON-ready record, a relative "last seen"."""

from __future__ import annotations

from datetime import UTC, datetime

from edgelab.store.models import Device


def address_of(d: Device) -> str:
    """``user@host:port via jump`` for SSH, ``serial @ server`` for ADB, ``local`` for the lab host."""
    if d.transport == "ssh":
        host = f"[{d.ssh_host}]" if d.ssh_host and ":" in d.ssh_host and d.ssh_port else (d.ssh_host or "")
        text = (f"{d.ssh_user}@" if d.ssh_user else "") + host + (f":{d.ssh_port}" if d.ssh_port else "")
        return text + (f" via {d.ssh_jump}" if d.ssh_jump else "")
    if d.transport == "adb":
        return (d.adb_serial or "") + (f" @ {d.adb_server}" if d.adb_server else "")
    return "local"


def device_record(d: Device) -> dict:
    """Every column plus the display address; datetimes in ISO 8601 (UTC)."""
    rec = {"name": d.name, "class": d.device_class, "transport": d.transport, "address": address_of(d)}
    for column in Device.__table__.columns:  # table order, stable for readers and diffs
        if column.name in ("id", "name", "device_class", "transport"):
            continue
        value = getattr(d, column.name)
        rec[column.name] = value.isoformat() if isinstance(value, datetime) else value
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
