"""isa_supported: a build's instruction-set level against a CPU's flags (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgelab.errors import ConfigError
from edgelab.probe.parsers.cpuinfo import normalize_features
from edgelab.runtimes import isa_supported, load_runtimes
from edgelab.runtimes.isa import missing_flags, required_flags

# flags lines as /proc/cpuinfo prints them
HASWELL = "fpu vme lm sse2 ssse3 sse4_1 sse4_2 popcnt cx16 avx avx2 fma f16c bmi1 bmi2 movbe".split()
SANDY = "fpu lm sse2 ssse3 sse4_1 sse4_2 popcnt cx16 avx".split()
ORIN = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp".split()


def test_x86_64_v3_needs_avx2_fma_f16c():
    assert isa_supported("x86-64-v3", HASWELL)
    assert not isa_supported("x86-64-v3", SANDY)
    assert missing_flags("x86-64-v3", SANDY) == ["avx2", "bmi2", "f16c", "fma"]
    assert isa_supported("x86-64-v2", SANDY)
    assert not isa_supported("x86-64-v4", HASWELL)


def test_arm_levels_and_normalized_features():
    assert isa_supported("armv8.2-a+dotprod", ORIN)
    assert not isa_supported("armv8.6-a+i8mm", ORIN)
    assert not isa_supported("x86-64-v3", ORIN)
    # edgelab.probe's normalized names work as well as the raw flags
    assert isa_supported("armv8.2-a+dotprod", normalize_features(ORIN) + ["asimd"])
    assert isa_supported("avx2+fma", HASWELL) and not isa_supported("avx2+fma", SANDY)


def test_unknown_flags_are_not_support_and_no_requirement_is():
    assert not isa_supported("x86-64-v3", [])
    assert isa_supported(None, [])
    with pytest.raises(ConfigError):
        required_flags("+")


def test_this_hosts_cpuinfo_runs_the_x86_recipe_level():
    spec = load_runtimes()["llama.cpp"]
    assert spec.targets["linux-x86_64"].isa == "x86-64-v3"
    text = Path("/proc/cpuinfo").read_text()
    flags = next(
        line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith(("flags", "Features"))
    )
    # the shared prebuild and the recipe's build run here, so this host must pass its own check
    assert isa_supported("x86-64-v3", flags)
