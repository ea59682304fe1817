"""Thermal zones from ``grep . /sys/class/thermal/thermal_zone*/type /sys/class/thermal/thermal_zone*/temp``
(or ``zoneN type temp`` lines): zone type and temperature in degrees C."""

from __future__ import annotations

import re

from edgelab.probe.parsers.base import ParseResult, parser, to_float

_GREP = re.compile(r"thermal_zone(\d+)/(type|temp):\s*(.*)$")
_TABLE = re.compile(r"^\s*(?:thermal_zone)?(\d+)\s+(\S+)\s+(-?\d+(?:\.\d+)?)\s*$")


def millic_to_c(raw: float) -> float:
    """sysfs gives milli-degrees; a few vendor drivers give degrees or deci-degrees already."""
    if abs(raw) >= 1000:
        return round(raw / 1000.0, 3)
    return raw


@parser("grep . /sys/class/thermal/thermal_zone*/{type,temp}")
def parse_thermal(text: str, res: ParseResult) -> None:
    v, f = res.values, res.facts
    zones: dict[int, dict[str, str]] = {}
    for line in text.split("\n"):
        if m := _GREP.search(line.strip()):
            zones.setdefault(int(m[1]), {})[m[2]] = m[3].strip()
        elif m := _TABLE.match(line):
            zones.setdefault(int(m[1]), {}).update({"type": m[2], "temp": m[3]})
    for zone, attrs in sorted(zones.items()):
        name = attrs.get("type") or f"zone{zone}"
        v[f"thermal_zone{zone}_type"] = name
        raw = to_float(attrs.get("temp", ""))
        if raw is None:
            if "temp" in attrs:
                res.warnings.append(f"thermal_zone{zone} ({name}): unreadable temp {attrs['temp'][:20]!r}")
            continue
        c = millic_to_c(raw)
        v[f"thermal_zone{zone}_temp_c"] = c
        if c > -100:
            key = name if name not in f.power.temperatures_c else f"{name}#{zone}"
            f.power.temperatures_c[key] = c
    if zones:
        v["zone_count"] = len(zones)
