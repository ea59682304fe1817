"""tegrastats' whole line grammar, field by field, as Jetson boards from TX1 to Thor print it.

One grammar for the probe (:func:`edgelab.probe.parsers.jetson.parse_tegrastats`) and the
telemetry sampler (:mod:`edgelab.metrics.telemetry`). Fields (any order, any subset, separated by
spaces; the grammar of NVIDIA's Tegrastats Utility pages, L4T 28 to 39, and the public captures
in tests/corpus/SOURCES.md):

- an optional ``MM-DD-YYYY HH:MM:SS`` timestamp;
- ``RAM used/totalMB (lfb NxSIZEMB)``, ``SWAP used/totalMB (cached NMB)``,
  ``IRAM used/totalkB(lfb NkB)`` (units kB, MB or GB);
- ``CPU [load%@MHz,...]`` (a core ``off`` or without ``@MHz``), or the L4T 28 form
  ``cpu [load%,load%]@MHz`` with one clock for every core;
- ``MTS fg N% bg N%``;
- an engine with load and clock: ``EMC_FREQ 0%@2133``, ``GR3D_FREQ 0%@[305,305]`` (one clock
  per GPC), ``NVENC 1%@115``, ``GR3D_FREQ 0%`` (no clock), or a clock alone: ``EMC_FREQ @2133``,
  ``GR3D_FREQ @[314,314,314]`` and ``NVENC0_FREQ @314`` (Thor, L4T 38);
- an engine with a clock or a state: ``VIC_FREQ 729``, ``APE 174``, ``NVENC off``,
  ``NVDEC 192``, ``NVJPG1 off``, ``OFA off``, ``NVDLA0 off``, ``PVA0_FREQ off``, ``SE 0``...;
- temperatures ``name@XXC``, with a ``/YYC`` limit on Thor (JetPack 7.2); ``-256C`` = sensor
  off, listed in ``sensors_off`` and never read as a temperature;
- power rails ``NAME cur/avg`` with or without ``mW`` (``VDD_IN 5299mW/5299mW``,
  ``POM_5V_IN 900/943``), and ``cur/avg/peak`` on Thor (JetPack 7.2); a negative reading
  (an uncalibrated ``VDD_GPU -392mW``) is kept as printed.

Every field is parsed; a token that matches none is kept in ``unparsed`` (never dropped).
"""

from __future__ import annotations

import re
from typing import Any

_UNIT = {"kB": 1 / 1024, "KB": 1 / 1024, "MB": 1.0, "GB": 1024.0}
_CLOCKS = r"@\[?([\d,]+)\]?"
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("time", re.compile(r"^\s*(\d{2}-\d{2}-\d{4} \d{2}:\d{2}:\d{2})")),
    ("ram", re.compile(r"\bRAM (\d+)/(\d+)(kB|KB|MB|GB)(?:\s*\(lfb (\d+)x(\d+)(kB|KB|MB|GB)\))?")),
    ("swap", re.compile(r"\bSWAP (\d+)/(\d+)(kB|KB|MB|GB)(?:\s*\(cached (\d+)(kB|KB|MB|GB)\))?")),
    ("iram", re.compile(r"\bIRAM (\d+)/(\d+)(kB|KB|MB|GB)(?:\s*\(lfb (\d+)(kB|KB|MB|GB)\))?")),
    ("cpu", re.compile(r"\b(?:CPU|cpu) \[([^\]]*)\](?:@(\d+))?")),
    ("mts", re.compile(r"\bMTS fg (\d+)% bg (\d+)%")),
    ("rail", re.compile(r"\b([A-Z][A-Z0-9_]*) (-?\d+)(?:mW)?/(-?\d+)(?:mW)?(?:/(-?\d+)(?:mW)?)?(?=\s|$)")),
    ("engine_load", re.compile(rf"\b([A-Z][A-Z0-9_]*) (?:(\d+)%(?:{_CLOCKS})?|{_CLOCKS})(?=\s|$)")),
    ("temp", re.compile(r"\b([A-Za-z][\w]*)@(-?\d+(?:\.\d+)?)C(?:/(-?\d+(?:\.\d+)?)C)?(?=\s|$)")),
    ("engine", re.compile(r"\b([A-Z][A-Z0-9_]*)\s+(off|\d+)(?=\s|$)")),
]


def _mb(value: str, unit: str) -> float:
    return int(value) * _UNIT[unit]


def _cores(listed: str, shared_mhz: str | None) -> list[dict[str, Any]]:
    cores: list[dict[str, Any]] = []
    for c in (x.strip() for x in listed.split(",") if x.strip()):
        cm = re.fullmatch(r"(\d+)%(?:@(\d+))?", c)
        if c.lower() == "off":
            cores.append({"online": False, "load_pct": None, "mhz": None})
        elif cm:
            mhz = cm[2] or shared_mhz
            cores.append({"online": True, "load_pct": float(cm[1]), "mhz": float(mhz) if mhz else None})
        else:
            cores.append({"online": None, "raw": c})
    return cores


def parse_line(line: str) -> dict[str, Any] | None:
    """Every field of one tegrastats line; None when it is not one (no RAM field)."""
    if "RAM " not in line:
        return None
    rest = line
    out: dict[str, Any] = {"engines": {}, "temps_c": {}, "rails_mw": {}, "rails_avg_mw": {}}

    def take(m: re.Match[str]) -> None:
        nonlocal rest
        rest = rest[: m.start()] + " " * (m.end() - m.start()) + rest[m.end() :]

    for kind, pat in _PATTERNS:
        for m in list(pat.finditer(rest)):
            if kind == "time":
                out["timestamp"] = m[1]
            elif kind == "ram":
                out["ram_used_mb"], out["ram_total_mb"] = _mb(m[1], m[3]), _mb(m[2], m[3])
                if m[4]:
                    out["lfb_blocks"], out["lfb_block_mb"] = int(m[4]), _mb(m[5], m[6])
            elif kind == "swap":
                out["swap_used_mb"], out["swap_total_mb"] = _mb(m[1], m[3]), _mb(m[2], m[3])
                if m[4]:
                    out["swap_cached_mb"] = _mb(m[4], m[5])
            elif kind == "iram":
                out["iram_used_kb"], out["iram_total_kb"] = _mb(m[1], m[3]) * 1024, _mb(m[2], m[3]) * 1024
                if m[4]:
                    out["iram_lfb_kb"] = _mb(m[4], m[5]) * 1024
            elif kind == "cpu":
                out["cpus"] = _cores(m[1], m[2])
            elif kind == "mts":
                out["mts_fg_pct"], out["mts_bg_pct"] = float(m[1]), float(m[2])
            elif kind == "rail":
                out["rails_mw"][m[1]] = int(m[2])
                out["rails_avg_mw"][m[1]] = int(m[3])
                if m[4] is not None:
                    out.setdefault("rails_peak_mw", {})[m[1]] = int(m[4])
            elif kind == "engine_load":
                clocks = [float(x) for x in (m[3] or m[4] or "").split(",") if x]
                load = float(m[2]) if m[2] is not None else None
                out["engines"][m[1]] = {"load_pct": load, "mhz": clocks or None}
            elif kind == "temp":
                t = float(m[2])
                if t > -200:  # -256C: the sensor is off
                    out["temps_c"][m[1]] = t
                    if m[3] is not None:
                        out.setdefault("temp_limits_c", {})[m[1]] = float(m[3])
                else:
                    out.setdefault("sensors_off", []).append(m[1])
            elif kind == "engine":
                out["engines"][m[1]] = {"state": "off"} if m[2] == "off" else {"mhz": float(m[2])}
            take(m)
    leftover = rest.split()
    if leftover:
        out["unparsed"] = leftover
    return out
