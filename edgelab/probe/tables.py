"""Lookup tables (versioned YAML data under ``probe/tables/``): IDs -> names, kept out of code.

Every lookup returns ``None`` for an unknown ID, so the caller keeps the raw ID and says
"unknown" instead of dropping it (a new L4T must still show its version, only JetPack is unknown).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from pathlib import Path
from typing import Any

import yaml

TABLE_DIR = Path(__file__).with_suffix("")  # edgelab/probe/tables/


@functools.cache
def load(name: str) -> dict[str, Any]:
    """One table file by stem, e.g. ``load("l4t_jetpack")``; raises if the packaged file is missing."""
    with open(TABLE_DIR / f"{name}.yaml", encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    return data


def versions() -> dict[str, Any]:
    """Table name -> its ``version`` field, recorded with snapshots so re-parses are comparable."""
    return {p.stem: load(p.stem).get("version") for p in sorted(TABLE_DIR.glob("*.yaml"))}


def jetpack_for_l4t(l4t: str | None) -> str | None:
    if not l4t:
        return None
    l4t = l4t.strip().lstrip("Rr")
    return load("l4t_jetpack")["table"].get(l4t)


def tegra_soc(soc: str | None) -> dict[str, Any] | None:
    """tegra234 / tegra23x -> {family, products, cuda_arch, soc}."""
    if not soc:
        return None
    data = load("tegra_soc")
    key = soc.strip().lower()
    key = data.get("aliases", {}).get(key, key)
    row = data["table"].get(key)
    return {**row, "soc": key} if row else None


def jetson_module(pnumber: str | None) -> dict[str, Any] | None:
    if not pnumber:
        return None
    row = load("jetson_modules")["table"].get(pnumber.strip().lower())
    return dict(row) if row else None


def jetson_carrier(pnumber: str | None) -> str | None:
    if not pnumber:
        return None
    return load("jetson_modules").get("carriers", {}).get(pnumber.strip().lower())


def _norm_part(part: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", part.upper())


def qualcomm_part(part: str | None) -> dict[str, Any] | None:
    """SM8750 / SM8750-AB / X1E78100 / X1E-78-100 -> {part, name, hexagon, gpu}."""
    if not part:
        return None
    parts = load("qualcomm")["parts"]
    want = _norm_part(part)
    for key, row in parts.items():  # an exact part (SM8250-AC, the 870) before its base (SM8250)
        if want == _norm_part(key):
            return {**row, "part": key}
    for key, row in parts.items():  # SM8750-AB: a package/bin suffix of a known part
        nk = _norm_part(key)
        if want.startswith(nk) and len(want) - len(nk) <= 2 and not want[len(nk) :].isdigit():
            return {**row, "part": key}
    return None


def find_qualcomm_part(text: str | None) -> str | None:
    """The first known Qualcomm part named anywhere in a string ('... SDM845', 'X1P64100')."""
    if not text:
        return None
    for token in re.findall(r"[A-Za-z0-9][A-Za-z0-9-]{3,12}", text):
        row = qualcomm_part(token)
        if row:
            return row["part"]
    return None


def board_platform(platform: str | None) -> list[str]:
    if not platform:
        return []
    return list(load("qualcomm").get("platforms", {}).get(platform.strip().lower(), []))


def arm_implementer(impl: str | None) -> str | None:
    if not impl:
        return None
    return load("arm_cpu_parts")["implementers"].get(_hex(impl))


def arm_core(impl: str | None, part: str | None) -> str | None:
    if not impl or not part:
        return None
    return load("arm_cpu_parts")["parts"].get(_hex(impl), {}).get(_hex(part, 3))


def _hex(value: str, width: int = 2) -> str:
    try:
        return f"0x{int(value.strip(), 16):0{width}x}"
    except (ValueError, AttributeError):
        return str(value).strip().lower()


def _label_key(label: str) -> str:
    s = unicodedata.normalize("NFC", label).strip().rstrip(":：").strip().casefold()
    return re.sub(r"\s+", " ", s)


@functools.cache
def lscpu_labels() -> tuple[dict[str, str], dict[str, set[str]]]:
    """(normalized label -> key, normalized label -> locales using it)."""
    data = load("lscpu_labels")
    to_key: dict[str, str] = {}
    locales: dict[str, set[str]] = {}
    for key, per_locale in data["keys"].items():
        for loc, label in per_locale.items():
            n = _label_key(str(label))
            to_key[n] = key
            locales.setdefault(n, set()).add(loc)
    for label, key in (data.get("extra") or {}).items():
        to_key.setdefault(_label_key(str(label)), key)
    return to_key, locales


def lscpu_key(label: str) -> tuple[str | None, set[str]]:
    to_key, locales = lscpu_labels()
    n = _label_key(label)
    return to_key.get(n), locales.get(n, set())
