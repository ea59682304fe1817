"""The device catalog (``devices/*.yaml``): one entry per device model the lab cares about.

An entry says how to recognise the model from probed facts (``match`` or ``match_any``), which
class of deploy defaults it gets, what it can run (capabilities) and which runtime builds reach it
(runtime targets). A ``variant: true`` entry is an execution configuration of a machine (its
Radeon iGPU, its NPU, joint execution): it is reported as a matrix row the machine also serves,
and never wins over the machine's own entry.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgelab.catalog.rules import RULES
from edgelab.catalog.schema import Field, check, raise_if
from edgelab.catalog.yamlsrc import SrcDict, load_file
from edgelab.errors import CatalogError

DEVICE_CLASSES = ("cuda_discrete", "jetson", "x86_cpu", "arm64_cpu", "npu_phone")

ENTRY_SPEC = {
    "id": Field(str, required=True),
    "name": Field(str, required=True),
    "class": Field(str, required=True, choices=DEVICE_CLASSES),
    "matrix_row": Field(int, minimum=1),
    "variant": Field(bool),
    "priority": Field(int),
    "match": Field(dict),
    "match_any": Field(list, items=dict),
    "capabilities": Field(dict),
    "runtime_targets": Field(list, required=True, items=str),
    "notes": Field(str),
}

CAPABILITY_SPEC = {
    "cuda_arch": Field(str),
    "vulkan": Field(bool),
    "opencl": Field(bool),
    "qnn_htp": Field(str),
    "npu": Field(str),
    "directml": Field(bool),
    "bf16": Field(bool),
    "memory_gb": Field(float, minimum=0),
    "unified_memory": Field(bool),
    "vllm_omni": Field(bool),
}

_RULE_SPEC = {
    name: Field(list, items=(str, int)) if kind == "list" else Field(bool) if kind == "bool" else Field(float)
    for name, (kind, _) in RULES.items()
}


@dataclass
class DeviceEntry:
    id: str
    name: str
    device_class: str
    runtime_targets: list[str]
    match_sets: list[dict[str, Any]]  # alternatives; an entry holds when one set holds entirely
    capabilities: dict[str, Any] = field(default_factory=dict)
    matrix_row: int | None = None
    variant: bool = False
    priority: int = 0
    notes: str = ""
    source: str = "?"  # file:line of the entry

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "class": self.device_class,
            "matrix_row": self.matrix_row,
            "variant": self.variant,
            "match_sets": [dict(m) for m in self.match_sets],
            "capabilities": dict(self.capabilities),
            "runtime_targets": list(self.runtime_targets),
            "notes": self.notes,
            "source": self.source,
        }


@dataclass
class DeviceCatalog:
    entries: list[DeviceEntry]
    files: list[str] = field(default_factory=list)

    def get(self, entry_id: str) -> DeviceEntry | None:
        return next((e for e in self.entries if e.id == entry_id), None)

    def matrix_rows(self) -> dict[int, DeviceEntry]:
        return {e.matrix_row: e for e in self.entries if e.matrix_row is not None}


def default_devices_dir() -> Path:
    """``EDGELAB_DEVICES``, else ``./devices`` when present, else the repository's ``devices/``."""
    env = os.environ.get("EDGELAB_DEVICES")
    if env:
        return Path(env)
    cwd = Path.cwd() / "devices"
    if cwd.is_dir() and any(cwd.glob("*.yaml")):
        return cwd
    return Path(__file__).resolve().parents[2] / "devices"


def _entry(raw: SrcDict, errors: list[str]) -> DeviceEntry | None:
    where = raw.where() if isinstance(raw, SrcDict) else "?"
    if not check(raw, ENTRY_SPEC, "device entry", where, errors):
        return None
    ok = True
    sets: list[dict[str, Any]] = []
    if ("match" in raw) == ("match_any" in raw):
        errors.append(f"{where}: device entry {raw['id']!r} needs exactly one of 'match' or 'match_any'")
        return None
    for rules in [raw["match"]] if "match" in raw else list(raw["match_any"]):
        rwhere = rules.where() if isinstance(rules, SrcDict) else where
        if not rules:
            errors.append(
                f"{rwhere}: empty match rules in {raw['id']!r}: an entry must say how to recognise it"
            )
            ok = False
        ok = check(rules, _RULE_SPEC, "match rules", rwhere, errors) and ok
        sets.append(rules)
    caps = raw.get("capabilities", {})
    ok = check(caps, CAPABILITY_SPEC, "capabilities", raw.where("capabilities"), errors) and ok
    if not ok:
        return None
    return DeviceEntry(
        id=raw["id"],
        name=raw["name"],
        device_class=raw["class"],
        runtime_targets=list(raw["runtime_targets"]),
        match_sets=sets,
        capabilities=dict(caps),
        matrix_row=raw.get("matrix_row"),
        variant=bool(raw.get("variant", False)),
        priority=int(raw.get("priority", 0)),
        notes=str(raw.get("notes", "")).strip(),
        source=where,
    )


def parse_devices_file(data: Any, file: str, errors: list[str]) -> list[DeviceEntry]:
    """A file holds one entry (a mapping with ``id``) or ``devices: [entry, ...]``."""
    if isinstance(data, dict) and "devices" in data:
        extra = [k for k in data if k not in ("devices", "version")]
        for k in extra:
            errors.append(
                f"{data.where(k) if isinstance(data, SrcDict) else file}: unknown top-level key {k!r}"
            )
        items = data["devices"]
        if not isinstance(items, list):
            errors.append(f"{data.where('devices')}: 'devices' must be a list of entries")
            return []
    elif isinstance(data, dict):
        items = [data]
    else:
        errors.append(f"{file}:1: expected a device entry or 'devices: [...]'")
        return []
    out = []
    for item in items:
        e = _entry(item, errors)
        if e:
            out.append(e)
    return out


def load_devices(path: Path | str | None = None) -> DeviceCatalog:
    """Load every ``*.yaml`` in the directory (or one file); raises :class:`CatalogError` naming file:line."""
    root = Path(path) if path else default_devices_dir()
    files = sorted(root.glob("*.yaml")) if root.is_dir() else [root]
    if not files or not files[0].exists():
        raise CatalogError(
            f"{root}: no device catalog files (*.yaml)",
            remedy="set EDGELAB_DEVICES to the devices/ directory of the edgelab checkout",
        )
    errors: list[str] = []
    entries: list[DeviceEntry] = []
    for f in files:
        entries.extend(parse_devices_file(load_file(f), str(f), errors))
    seen: dict[str, DeviceEntry] = {}
    for e in entries:
        if e.id in seen:
            errors.append(f"{e.source}: duplicate device id {e.id!r} (first at {seen[e.id].source})")
        seen.setdefault(e.id, e)
    raise_if(errors)
    return DeviceCatalog(entries=entries, files=[str(f) for f in files])
