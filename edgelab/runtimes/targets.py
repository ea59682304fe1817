"""What a build target means (OS, architecture, ABI, accelerator) and whether a device can run it.

A target is ``<os>-<arch>[-<accelerator>]``: ``linux-aarch64``, ``android-arm64``, ``windows-x64``,
``linux-aarch64-cuda-sm87``, ``linux-x86_64-cuda``. A build for one is a file format and an
instruction set: an ELF for Linux or Android (Android: the arm64-v8a ABI's kernel and paths), a PE
for Windows, for one CPU architecture, needing the ISA level it was compiled for, and for a CUDA
target a GPU of an architecture it holds code for. :func:`mismatches` compares that with what a
device's facts say it is; a plan refuses a build with any mismatch before anything is pushed.
Pure: no probing, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from edgelab.runtimes.isa import implied_flags, level_from_cpu_name, missing_flags

_ARCH = {"x86_64": "x86_64", "x64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
_ABI = {("android", "aarch64"): "arm64-v8a", ("android", "x86_64"): "x86_64"}
_FORMAT = {"linux": "ELF", "android": "ELF", "windows": "PE"}


def norm_arch(word: str | None) -> str | None:
    return _ARCH.get((word or "").lower(), (word or "").lower() or None)


@dataclass(frozen=True)
class Target:
    """A build target, parsed: ``linux-aarch64-cuda-sm87`` -> linux, aarch64, cuda-sm87."""

    name: str
    os: str
    arch: str
    accel: str | None = None

    @classmethod
    def parse(cls, name: str) -> Target:
        os_name, _, rest = name.partition("-")
        arch_word, _, accel = rest.partition("-")
        return cls(name, os_name, norm_arch(arch_word) or arch_word, accel or None)

    @property
    def abi(self) -> str:
        """The ABI a device of this target runs: Android's (arm64-v8a), else the OS's own."""
        return _ABI.get((self.os, self.arch), {"windows": "win64"}.get(self.os, "gnu/linux"))

    @property
    def binary_format(self) -> str:
        return _FORMAT.get(self.os, "?")

    @property
    def cpu_only(self) -> bool:
        return self.accel is None

    @property
    def cuda(self) -> bool:
        return (self.accel or "").startswith("cuda")


@dataclass(frozen=True)
class Platform:
    """What a device is, from its facts (or what the lab host is): the words a target is checked on."""

    os: str | None
    arch: str | None
    flags: tuple[str, ...] = ()
    cuda_archs: tuple[str, ...] = ()  # sm_87, sm_120 ... of its NVIDIA GPUs
    what: str = ""  # how to name it in a refusal: "android aarch64 (arm64-v8a), Galaxy S25"
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def abi(self) -> str | None:
        if not (self.os and self.arch):
            return None
        return Target(f"{self.os}-{self.arch}", self.os, self.arch).abi

    def describe(self) -> str:
        if self.what:
            return self.what
        parts = [self.os or "unknown OS", self.arch or "unknown architecture"]
        return " ".join(parts) + (f" ({self.abi})" if self.os == "android" else "")


def platform_of(facts, name: str = "") -> Platform:
    """A device's platform from its probed facts (``edgelab.probe.facts.Facts``)."""
    os_name = (facts.os.family or "").lower() or None
    arch = norm_arch(facts.os.arch or facts.cpu.arch)
    flags = tuple(facts.cpu.raw_flags or facts.cpu.features or ())
    extra: dict[str, str] = {}
    if not flags:  # Windows reports no cpuid flags: the level of the CPU's family, said so
        level = level_from_cpu_name(facts.cpu.model)
        if level:
            flags = tuple(sorted(implied_flags(level)))
            extra["flags_from"] = f"the CPU's name ({facts.cpu.model}: {level})"
    cuda = tuple(  # "unknown" for an NVIDIA GPU whose architecture the facts lack
        a.cuda_arch or "unknown"
        for a in facts.accelerators
        if (a.vendor or "").lower().startswith("nvidia") and a.kind == "gpu"
    )
    label = " ".join(x for x in (os_name, arch) if x) or "unknown"
    if os_name == "android" and arch:
        label += f" ({_ABI.get((os_name, arch), arch)})"
    model = " ".join(x for x in (facts.identity.vendor, facts.identity.model) if x)
    if model:
        label += f", {model}"
    if facts.os.distro:
        label += f", {facts.os.distro}"
    return Platform(os_name, arch, flags, cuda, label, extra)


def _sm(word: str) -> int | None:
    digits = "".join(ch for ch in word if ch.isdigit())
    return int(digits) if digits else None


def cuda_mismatch(build_archs: Iterable[str], device_archs: Iterable[str]) -> str | None:
    """None when one device GPU runs code built for one of ``build_archs`` (SASS for sm_XY runs on
    the same major, same or later minor); else why not."""
    want = [a for a in (_sm(x) for x in build_archs) if a is not None]
    devices = list(device_archs)
    have = [a for a in (_sm(x) for x in devices) if a is not None]
    if not devices:
        return "no NVIDIA GPU in its facts"
    if not have:
        return "its NVIDIA GPU's architecture is unknown (nvidia-smi's compute_cap, or the Jetson's tables)"
    if not want:
        return None
    for dev in have:
        if any(b // 10 == dev // 10 and b % 10 <= dev % 10 for b in want):
            return None
    return (
        f"its GPU is sm_{', sm_'.join(str(h) for h in have)}; the build holds code for "
        f"sm_{', sm_'.join(str(w) for w in want)} only"
    )


def mismatches(target: str, isa: str | None, device: Platform, cuda_archs: Iterable[str] = ()) -> list[str]:
    """Every way a build for ``target`` (needing ``isa``) cannot run on ``device``; empty: it can."""
    t = Target.parse(target)
    out = []
    if device.os is None:
        out.append("the device's OS is unknown (probe it)")
    elif t.os != device.os:
        out.append(f"OS: the build is for {t.os} ({t.binary_format}), the device runs {device.os}")
    if device.arch is None:
        out.append("the device's CPU architecture is unknown (probe it)")
    elif t.arch != device.arch:
        out.append(f"architecture: the build is {t.arch}, the device's CPU is {device.arch}")
    elif device.os == t.os and device.abi and t.abi != device.abi:
        out.append(f"ABI: the build is {t.abi}, the device is {device.abi}")
    if not out and isa:
        if not device.flags:
            out.append(f"ISA: the build needs {isa}; the device's CPU flags are unknown")
        else:
            lack = missing_flags(isa, device.flags)
            if lack:
                out.append(f"ISA: the build needs {isa}; the device's CPU lacks {', '.join(lack)}")
    if not out and t.cuda:
        why = cuda_mismatch(cuda_archs, device.cuda_archs)
        if why:
            out.append(f"CUDA: {why}")
    return out


def cpu_targets(targets: Iterable[str]) -> list[str]:
    """The CPU-only targets among a device's (``linux-aarch64`` of ``[linux-aarch64-cuda-sm87,
    linux-aarch64]``): what runs under user-mode emulation, where no GPU is."""
    return [t for t in targets if Target.parse(t).cpu_only]


__all__ = ["Platform", "Target", "cpu_targets", "cuda_mismatch", "mismatches", "norm_arch", "platform_of"]
