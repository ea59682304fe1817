"""How the virtual lab runs a device's own build on the lab host, and how its figures are labelled.

A virtual device runs the build a real one of its kind gets: an aarch64 ELF (Jetson, ARM Linux,
Android) under qemu's user-mode emulation (each aarch64 persona registers ``qemu-aarch64-static``
in its own binfmt_misc, see ``edgelab/sim/_enter.py``), a Windows x64 executable through wine in
the persona's own prefix (``edgelab/sim/winsim/native.py``), a build of the lab host's own
architecture as it is. Figures from the first two are ``emulated``: never compared with a
device's, never a matrix cell's evidence. ``--lab-host-build`` runs the lab host's own build
instead (faster, labelled so). Windows on Arm executables have no emulator here.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

from edgelab.runtimes.targets import Target, norm_arch

QEMU = {"aarch64": "/usr/bin/qemu-aarch64-static"}
WINE = "/usr/lib/wine/wine64"


def host_arch() -> str:
    return norm_arch(platform.machine()) or platform.machine()


@dataclass(frozen=True)
class Execution:
    """How a build runs on a virtual device: ``mode`` native | emulated | lab-host-build."""

    mode: str
    target: str
    emulator: str | None = None  # qemu-aarch64 user mode, wine
    missing: str | None = None  # why the lab cannot run it (no emulator installed, none exists)

    @property
    def emulated(self) -> bool:
        return self.mode == "emulated"

    def label(self) -> str:
        if self.mode == "lab-host-build":
            return f"lab host build ({self.target}), --lab-host-build"
        if self.missing:
            return f"the device's own build ({self.target}): this lab cannot run it ({self.missing})"
        if self.mode == "emulated":
            return f"emulated: the device's own build ({self.target}) under {self.emulator}"
        return f"the device's own build ({self.target}) on the lab host's CPU"

    def to_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "target": self.target,
            "emulator": self.emulator,
            "emulated": self.emulated,
            "label": self.label(),
        }


def _kernel_has_userns_binfmt() -> bool:
    """binfmt_misc per user namespace arrived in Linux 6.7."""
    try:
        major, minor = (int(x) for x in platform.release().split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (6, 7)


def execution(target: str, *, lab_host_build: bool = False) -> Execution:
    """How the virtual lab runs a build for ``target``."""
    if lab_host_build:
        return Execution("lab-host-build", target)
    t = Target.parse(target)
    here = host_arch()
    if t.os == "windows":
        if t.arch != "x86_64" or here != "x86_64":
            return Execution(
                "emulated",
                target,
                "wine",
                missing=f"no emulator for Windows {t.arch} executables on a {here} lab host "
                "(wine runs x64 ones only)",
            )
        if not os.access(WINE, os.X_OK):
            return Execution(
                "emulated", target, "wine", missing=f"{WINE} is not installed (apt-get install -y wine64)"
            )
        return Execution("emulated", target, "wine")
    if t.arch == here:
        return Execution("native", target)
    qemu = QEMU.get(t.arch)
    emulator = f"qemu-{t.arch} user mode"
    if qemu is None:
        return Execution("emulated", target, emulator, missing=f"no user-mode emulator for {t.arch} here")
    if not os.access(qemu, os.X_OK):
        return Execution(
            "emulated",
            target,
            emulator,
            missing=f"{qemu} is not installed (apt-get install -y qemu-user-static)",
        )
    if not _kernel_has_userns_binfmt():
        return Execution(
            "emulated",
            target,
            emulator,
            missing=f"the lab host's kernel {platform.release()} has no binfmt_misc per user namespace (Linux 6.7+)",
        )
    return Execution("emulated", target, emulator)


__all__ = ["QEMU", "WINE", "Execution", "execution", "host_arch"]
