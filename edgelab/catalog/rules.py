"""Match rules of a device entry, evaluated on Facts.

Each rule is a key in an entry's ``match`` mapping. A rule either holds or not, and always says
what it saw, so "closest entry" explanations can show the operator which fact was missing.
List-valued rules hold when *any* listed value fits, except ``accelerator_kind`` (every listed
kind must be present).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from edgelab.probe.facts import Facts
from edgelab.units import GIB


@dataclass(frozen=True)
class RuleResult:
    rule: str
    expected: Any
    holds: bool
    saw: Any  # the fact the rule read (None: the fact is unknown)

    def describe(self) -> str:
        mark = "ok" if self.holds else "no"
        return f"{self.rule}={self.expected!r}: {mark} (facts: {self.saw!r})"


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def _part_matches(want: str, have: str | None) -> bool:
    """SM8750 matches SM8750-AB; X1E-78-100 matches X1E78100 (the tables normalize the same way)."""
    if not have:
        return False
    w, h = _norm(want), _norm(have)
    return h == w or (h.startswith(w) and len(h) - len(w) <= 2 and not h[len(w) :].isdigit())


def _contains_any(needles: list[str], hay: list[str | None]) -> tuple[bool, Any]:
    texts = [h for h in hay if h]
    for n in needles:
        for t in texts:
            if n.lower() in t.lower():
                return True, t
    return False, texts or None


def ram_bytes(facts: Facts) -> int | None:
    """Physical RAM as the device sees it (the WSL VM's RAM under WSL; host RAM is a separate pool)."""
    pools = facts.pools("ram")
    return max((p.total_bytes for p in pools if p.total_bytes), default=None)


def _soc_part(facts: Facts, want: list[str]) -> tuple[bool, Any]:
    have = facts.identity.soc_part
    return any(_part_matches(w, have) for w in want), have


def _board_platform(facts: Facts, want: list[str]) -> tuple[bool, Any]:
    have = facts.identity.board_platform
    return bool(have) and have.lower() in [w.lower() for w in want], have


def _module_pnumber(facts: Facts, want: list[str]) -> tuple[bool, Any]:
    have = facts.identity.module_pnumber
    return bool(have) and have.lower() in [w.lower() for w in want], have


def _model_contains(facts: Facts, want: list[str]) -> tuple[bool, Any]:
    return _contains_any(want, [facts.identity.model, facts.identity.module_name])


def _cpu_model_contains(facts: Facts, want: list[str]) -> tuple[bool, Any]:
    return _contains_any(want, [facts.cpu.model])


def _os_family(facts: Facts, want: list[str]) -> tuple[bool, Any]:
    have = facts.os.family
    return bool(have) and have in want, have


def _arch(facts: Facts, want: list[str]) -> tuple[bool, Any]:
    have = facts.os.arch or facts.cpu.arch
    return bool(have) and have in want, have


def _is_wsl(facts: Facts, want: bool) -> tuple[bool, Any]:
    have = facts.os.is_wsl
    if have is None and not want:
        # "not WSL" is known for Android and Windows-native facts even without a kernel line
        have = False if facts.os.family in ("android", "windows") else None
    return have is not None and have == want, have


def _accelerator_name_contains(facts: Facts, want: list[str]) -> tuple[bool, Any]:
    return _contains_any(want, [a.name for a in facts.accelerators])


def _accelerator_kind(facts: Facts, want: list[str]) -> tuple[bool, Any]:
    kinds = sorted({a.kind for a in facts.accelerators if a.usable is not False})
    return all(w in kinds for w in want), kinds


def _cuda_arch(facts: Facts, want: list[str]) -> tuple[bool, Any]:
    have = sorted({a.cuda_arch for a in facts.accelerators if a.cuda_arch})
    return any(h in want for h in have), have or None


def _soc_vendor(facts: Facts, want: list[str]) -> tuple[bool, Any]:
    have = facts.identity.soc_vendor
    return bool(have) and have.lower() in [w.lower() for w in want], have


def _min_ram_gb(facts: Facts, want: float) -> tuple[bool, Any]:
    have = ram_bytes(facts)
    return have is not None and have >= want * GIB, round(have / GIB, 1) if have else None


def _max_ram_gb(facts: Facts, want: float) -> tuple[bool, Any]:
    have = ram_bytes(facts)
    return have is not None and have <= want * GIB, round(have / GIB, 1) if have else None


def _l4t_major(facts: Facts, want: list[int]) -> tuple[bool, Any]:
    have = facts.os.l4t_version
    major = int(have.split(".")[0]) if have and have.split(".")[0].isdigit() else None
    return major in want, have


# rule name -> (value type for the schema: "list" of str/int, "bool" or "number"; evaluator)
RULES: dict[str, tuple[str, Callable[[Facts, Any], tuple[bool, Any]]]] = {
    "soc_part": ("list", _soc_part),
    "board_platform": ("list", _board_platform),
    "module_pnumber": ("list", _module_pnumber),
    "model_contains": ("list", _model_contains),
    "cpu_model_contains": ("list", _cpu_model_contains),
    "os_family": ("list", _os_family),
    "arch": ("list", _arch),
    "is_wsl": ("bool", _is_wsl),
    "accelerator_name_contains": ("list", _accelerator_name_contains),
    "accelerator_kind": ("list", _accelerator_kind),
    "cuda_arch": ("list", _cuda_arch),
    "soc_vendor": ("list", _soc_vendor),
    "l4t_major": ("list", _l4t_major),
    "min_ram_gb": ("number", _min_ram_gb),
    "max_ram_gb": ("number", _max_ram_gb),
}


def evaluate(rules: dict[str, Any], facts: Facts) -> list[RuleResult]:
    """Every rule of one rule set, in file order."""
    out = []
    for name, expected in rules.items():
        _, fn = RULES[name]
        holds, saw = fn(facts, expected)
        out.append(RuleResult(name, expected, bool(holds), saw))
    return out
