"""Facts + device catalog -> which catalog entry this device is, and its device class.

The most specific entry whose rules all hold wins (score = number of rules in the matching rule
set; ``priority`` only breaks ties). Variant entries (execution configurations such as a laptop's
iGPU or NPU) never beat the machine's own entry; they are listed in ``also_serves``. Without any
match the class comes from generic rules and the raw identifying facts are kept, together with the
entry that came closest and the rule that stopped it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgelab.catalog.devices import DeviceCatalog, DeviceEntry
from edgelab.catalog.rules import RuleResult, evaluate, ram_bytes
from edgelab.probe.facts import Facts


@dataclass
class Candidate:
    entry: DeviceEntry
    holds: bool
    score: int  # rules in the best holding set (0 when none holds)
    results: list[RuleResult]  # the best (holding, or closest) rule set

    @property
    def failed(self) -> list[RuleResult]:
        return [r for r in self.results if not r.holds]


@dataclass
class Classification:
    entry: DeviceEntry | None
    device_class: str
    score: int
    reasons: list[str] = field(default_factory=list)
    raw_ids: dict[str, Any] = field(default_factory=dict)
    generic_class: str = ""
    also_serves: list[str] = field(default_factory=list)  # other holding entries (variants: matrix rows)
    closest: str | None = None  # for unknown devices: the nearest entry and what stopped it

    @property
    def entry_id(self) -> str:
        return self.entry.id if self.entry else "unknown"

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry": self.entry_id,
            "entry_name": self.entry.name if self.entry else None,
            "matrix_row": self.entry.matrix_row if self.entry else None,
            "class": self.device_class,
            "generic_class": self.generic_class,
            "score": self.score,
            "reasons": list(self.reasons),
            "raw_ids": dict(self.raw_ids),
            "also_serves": list(self.also_serves),
            "closest": self.closest,
        }


def raw_ids(facts: Facts) -> dict[str, Any]:
    """The identifying facts an operator needs to add a catalog entry for an unknown device."""
    i, o = facts.identity, facts.os
    ids = {
        "vendor": i.vendor,
        "model": i.model,
        "board": i.board,
        "soc_part": i.soc_part,
        "soc_name": i.soc_name,
        "board_platform": i.board_platform,
        "module_pnumber": i.module_pnumber,
        "module_name": i.module_name,
        "l4t_version": o.l4t_version,
        "jetpack": o.jetpack,
        "os_family": o.family,
        "arch": o.arch or facts.cpu.arch,
        "is_wsl": o.is_wsl,
        "cpu_model": facts.cpu.model,
        "android_sdk": o.android_sdk,
        "windows_build": o.windows_build,
        "accelerators": [a.name for a in facts.accelerators if a.name] or None,
    }
    ram = ram_bytes(facts)
    if ram:
        ids["ram_gib"] = round(ram / 1024**3, 1)
    return {k: v for k, v in ids.items() if v is not None}


def _has_nvidia_discrete(facts: Facts) -> bool:
    for a in facts.accelerators:
        if a.kind == "gpu" and (a.vendor or "").upper() == "NVIDIA" and a.usable is not False:
            if any(p.kind == "vram" for p in facts.memory.pools) or facts.memory.unified is False:
                return True
    return False


def generic_class(facts: Facts) -> tuple[str, str]:
    """Class from facts alone (no catalog entry): (class, why)."""
    soc = (facts.identity.soc_part or "").lower()
    if facts.os.l4t_version or soc.startswith("tegra"):
        return (
            "jetson",
            f"L4T {facts.os.l4t_version or '?'} / SoC {facts.identity.soc_part or '?'}: an NVIDIA Jetson",
        )
    if _has_nvidia_discrete(facts):
        gpu = next(a.name for a in facts.accelerators if (a.vendor or "").upper() == "NVIDIA")
        return "cuda_discrete", f"discrete NVIDIA GPU {gpu} with its own VRAM"
    if facts.os.family == "android":
        npu = [a.name for a in facts.accelerators if a.kind == "npu"]
        return "npu_phone", "Android device" + (f" with NPU {npu[0]}" if npu else " (phone-class defaults)")
    arch = facts.os.arch or facts.cpu.arch
    if arch in ("aarch64", "arm"):
        return "arm64_cpu", f"{arch} CPU without a discrete CUDA GPU"
    if arch in ("x86_64", "x86"):
        return "x86_cpu", f"{arch} CPU without a discrete CUDA GPU"
    return "arm64_cpu", "architecture unknown: using the most conservative CPU defaults (arm64_cpu)"


def _nearness(c: Candidate) -> tuple[int, int]:
    """Smaller is nearer: fewest failed rules, then most rules that held."""
    return len(c.failed), -(len(c.results) - len(c.failed))


def closest_entry(cands: list[Candidate], device_class: str) -> str | None:
    """The nearest entry of the device's own class, and the rules that stopped it; None when the
    catalog has no entry of that class (an x86 GPU server is never "closest" to a Jetson)."""
    same = [c for c in cands if c.entry.device_class == device_class]
    if not same:
        return None
    c = min(same, key=_nearness)
    return f"{c.entry.id}: " + "; ".join(r.describe() for r in c.failed)


def evaluate_entry(entry: DeviceEntry, facts: Facts) -> Candidate:
    best: Candidate | None = None
    for rules in entry.match_sets:
        results = evaluate(rules, facts)
        holds = all(r.holds for r in results)
        cand = Candidate(entry, holds, len(results) if holds else 0, results)
        if best is None:
            best = cand
        elif holds and (not best.holds or cand.score > best.score):
            best = cand
        elif not holds and not best.holds and _nearness(cand) < _nearness(best):
            best = cand
    assert best is not None
    return best


def classify(facts: Facts, catalog: DeviceCatalog) -> Classification:
    """Which catalog entry and class this device is; never raises for odd facts."""
    cands = [evaluate_entry(e, facts) for e in catalog.entries]
    holding = [c for c in cands if c.holds]
    gclass, gwhy = generic_class(facts)
    ids = raw_ids(facts)
    pool = [c for c in holding if not c.entry.variant] or holding
    if not pool:
        closest = closest_entry(cands, gclass)
        reasons = [f"no catalog entry matches; generic rule: {gwhy}"]
        if closest:
            reasons.append(f"closest entry {closest}")
        else:
            reasons.append(f"no closest entry: the catalog has no entry of class {gclass}")
        return Classification(None, gclass, 0, reasons, ids, gclass, [], closest)
    pool.sort(key=lambda c: (c.score, c.entry.priority), reverse=True)
    win = pool[0]
    reasons = [
        f"entry {win.entry.id} ({win.entry.source}) matched {win.score} rule(s): "
        + "; ".join(r.describe() for r in win.results)
    ]
    ties = [c.entry.id for c in pool[1:] if (c.score, c.entry.priority) == (win.score, win.entry.priority)]
    if ties:
        reasons.append(f"tie with {', '.join(ties)}: kept the first in catalog order")
    if win.entry.variant:
        reasons.append(f"{win.entry.id} is a variant entry; no machine entry matched")
    reasons.append(f"class {win.entry.device_class} from the catalog entry")
    if gclass != win.entry.device_class:
        reasons.append(f"generic rules alone would say {gclass} ({gwhy})")
    also = [
        c.entry.id + (f" (matrix row {c.entry.matrix_row})" if c.entry.matrix_row else "")
        for c in holding
        if c is not win
    ]
    return Classification(win.entry, win.entry.device_class, win.score, reasons, ids, gclass, also, None)
