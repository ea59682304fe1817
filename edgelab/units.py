"""Units and the way edgelab writes figures: bytes in binary units, milliseconds, series captions,
and stored times in the operator's local time zone.

One home so a byte count or a series reads the same in every table, report and screen
(binary units throughout: 1 GiB = 2**30 bytes, as the memory facts and pools are counted).
Pure functions of numbers; below every other edgelab layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

KIB = 1024
MIB = 1024**2
GIB = 1024**3


def gib(n: float | None, digits: int = 1, *, missing: str | None = "-") -> str | None:
    """``n`` bytes as GiB (``12.3 GiB``); ``missing`` for None (pass ``n or None`` where a zero means
    "not reported", as a memory pool of size 0 does)."""
    return missing if n is None else f"{n / GIB:.{digits}f} GiB"


def mib(n: float | None, digits: int = 0, *, missing: str | None = "-") -> str | None:
    """``n`` bytes as MiB (``812 MiB``); ``missing`` for None."""
    return missing if n is None else f"{n / MIB:.{digits}f} MiB"


def human_bytes(n: float) -> str:
    """A size in the largest binary unit it reaches: ``512 B``, ``3.0 KiB``, ``1.5 GiB`` (GiB at most)."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def series_caption(label: str, values: Sequence[float], unit: str = "") -> str:
    """A sparkline's caption: the latest value, min, max and count (``no samples yet`` when empty)."""
    if not values:
        return f"{label}: no samples yet"
    last, lo, hi = values[-1], min(values), max(values)
    return f"{label}: {last:g}{unit}  (min {lo:g}, max {hi:g}, {len(values)} samples)"


def when(value: datetime | float | None, *, missing: str = "-", seconds: bool = True) -> str:
    """A stored time (a UTC datetime, naive ones read as UTC, or Unix seconds) in the operator's
    local time zone: ``15:12:59`` today, ``2026-12-03 15:12`` another day."""
    if value is None:
        return missing
    if isinstance(value, int | float):
        dt = datetime.fromtimestamp(float(value), tz=UTC)
    else:
        dt = value if value.tzinfo else value.replace(tzinfo=UTC)
    local = dt.astimezone()
    if local.date() == datetime.now().astimezone().date():
        return local.strftime("%H:%M:%S" if seconds else "%H:%M")
    return local.strftime("%Y-%m-%d %H:%M")


def clock(value: float | None) -> str:
    """Unix seconds as the local wall clock with milliseconds (``15:12:59.123``), for log lines."""
    if value is None:
        return "--:--:--.---"
    local = datetime.fromtimestamp(float(value), tz=UTC).astimezone()
    return local.strftime("%H:%M:%S.") + f"{local.microsecond // 1000:03d}"
