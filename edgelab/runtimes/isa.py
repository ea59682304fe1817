"""Instruction-set levels a native build needs, and whether a CPU's flags cover them.

A binary built for a level (``GGML_NATIVE=OFF`` on x86_64 compiles AVX2/FMA/F16C code paths)
dies with SIGILL on a CPU without them, so a build records the level it needs and a launch plan
is refused where the device's facts (``/proc/cpuinfo`` flags or ARM ``Features``) lack it.

``required`` is a level name from :data:`LEVELS` (``x86-64-v3``, ``armv8.2-a+dotprod``) or a
``+``-joined list of raw flags (``avx2+fma``). Pure: no probing here.
"""

from __future__ import annotations

from collections.abc import Iterable

from edgelab.errors import ConfigError

# level -> raw CPU flags (x86 cpuid names from /proc/cpuinfo, ARM hwcaps from Features)
LEVELS: dict[str, frozenset[str]] = {
    "x86-64": frozenset({"lm", "sse2"}),
    "x86-64-v2": frozenset({"lm", "sse2", "ssse3", "sse4_1", "sse4_2", "popcnt", "cx16"}),
    # what ggml's GGML_NATIVE=OFF x86 baseline compiles with: -msse4.2 -mf16c -mfma -mbmi2 -mavx -mavx2
    "x86-64-v3": frozenset({"lm", "sse2", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"}),
    "x86-64-v4": frozenset(
        {
            "lm",
            "sse4_2",
            "avx",
            "avx2",
            "fma",
            "f16c",
            "bmi2",
            "avx512f",
            "avx512bw",
            "avx512cd",
            "avx512dq",
            "avx512vl",
        }
    ),
    "armv8-a": frozenset({"asimd"}),
    "armv8.2-a": frozenset({"asimd", "asimdhp"}),
    "armv8.2-a+dotprod": frozenset({"asimd", "asimdhp", "asimddp"}),
    "armv8.6-a+i8mm": frozenset({"asimd", "asimdhp", "asimddp", "i8mm"}),
}

# CPUs whose flags a probe cannot read (Windows reports no cpuid flags over CIM), by the name it
# does report, and the level every part of that family has (vendors' product pages)
CPU_NAME_LEVELS: tuple[tuple[str, str], ...] = (
    (r"Ryzen AI (9|7|5) (HX |PRO )?3\d\d", "x86-64-v4"),  # Zen 5 (Strix Point): AVX-512
    (r"Ryzen (9|7|5) (PRO )?[78]\d\d\d", "x86-64-v4"),  # Zen 4 (Phoenix, Hawk Point): AVX-512
    (r"Core\(TM\) Ultra", "x86-64-v3"),  # Meteor/Lunar/Arrow Lake: AVX2, no AVX-512
    (r"Snapdragon\(R\) X|Oryon", "armv8.6-a+i8mm"),  # Oryon: ARMv8.7-A with dotprod, fp16, i8mm
)


def implied_flags(level: str) -> frozenset[str]:
    """Every flag a CPU of ``level`` has: an x86-64 level includes the levels below it."""
    order = ["x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"]
    if level in order:
        out: frozenset[str] = frozenset()
        for lv in order[: order.index(level) + 1]:
            out |= LEVELS[lv]
        return out
    return required_flags(level)


def level_from_cpu_name(name: str | None) -> str | None:
    """The ISA level a CPU has, from its marketing name (None: not a family in the table)."""
    import re

    for pattern, level in CPU_NAME_LEVELS:
        if name and re.search(pattern, name):
            return level
    return None


# normalized feature names (edgelab.probe's CPU.features) back to one raw flag each
_NORMALIZED = {"neon": "asimd", "fp16": "asimdhp", "dotprod": "asimddp", "avx512": "avx512f"}
# flags the kernel spells two ways
_ALIASES = {"neon": "asimd", "fphp": "asimdhp", "pni": "sse3"}


def required_flags(required: str) -> frozenset[str]:
    """The raw flags a level (or a ``+``-joined flag list) stands for."""
    req = required.strip().lower()
    if req in LEVELS:
        return LEVELS[req]
    parts = [p for p in req.split("+") if p]
    if not parts:
        raise ConfigError(
            f"empty instruction-set requirement {required!r}", remedy=f"use one of {', '.join(LEVELS)}"
        )
    # "armv8.2-a+dotprod"-style: a known level plus extra flags
    if parts[0] in LEVELS:
        return LEVELS[parts[0]] | {_NORMALIZED.get(p, p) for p in parts[1:]}
    return frozenset(_NORMALIZED.get(p, p) for p in parts)


def _normalize(cpu_flags: Iterable[str]) -> set[str]:
    have = set()
    for f in cpu_flags:
        f = f.strip().lower()
        have.add(f)
        have.add(_ALIASES.get(f, f))
        have.add(_NORMALIZED.get(f, f))
    if "asimd" in have:  # an aarch64 Features line never says "lm"; no x86 level applies anyway
        have.add("neon")
    return have


def missing_flags(required: str | None, cpu_flags: Iterable[str]) -> list[str]:
    """The flags ``required`` needs that ``cpu_flags`` lacks (empty: it runs); None needs nothing."""
    if not required:
        return []
    have = _normalize(cpu_flags)
    return sorted(required_flags(required) - have)


def isa_supported(required: str | None, cpu_flags: Iterable[str]) -> bool:
    """True when a CPU with ``cpu_flags`` can run a build that needs ``required``.

    ``cpu_flags``: raw flags (``CPU.raw_flags``) or normalized features (``CPU.features``); an
    empty list means the flags are unknown, which is *not* support: a launch must not guess.
    """
    flags = list(cpu_flags)
    if not required:
        return True
    if not flags:
        return False
    return not missing_flags(required, flags)


__all__ = [
    "CPU_NAME_LEVELS",
    "LEVELS",
    "isa_supported",
    "level_from_cpu_name",
    "missing_flags",
    "required_flags",
]
