"""What an executable file is, read from its header: ELF or PE, its machine, static or not.

A cross build that silently produced a host binary (a toolchain file ignored, a wrong compiler on
PATH) would be registered under the wrong target; each product is read back after the build and
checked against the target it claims, and the result is recorded in the build's manifest.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from edgelab.runtimes.targets import Target

ELF_MACHINES = {62: "x86_64", 183: "aarch64", 3: "x86", 40: "arm"}
PE_MACHINES = {0x8664: "x86_64", 0xAA64: "aarch64", 0x14C: "x86", 0x1C4: "arm"}
PT_INTERP = 3


@dataclass(frozen=True)
class Binary:
    format: str  # ELF | PE | other
    machine: str | None  # x86_64, aarch64 ...
    static: bool | None = None  # ELF: no program interpreter (PT_INTERP)

    def to_dict(self) -> dict[str, object]:
        return {"format": self.format, "machine": self.machine, "static": self.static}


def _elf(data: bytes) -> Binary:
    is64, little = data[4] == 2, data[5] == 1
    end = "<" if little else ">"
    machine = struct.unpack_from(end + "H", data, 18)[0]
    if is64:
        phoff = struct.unpack_from(end + "Q", data, 32)[0]
        phentsize, phnum = struct.unpack_from(end + "HH", data, 54)
    else:
        phoff = struct.unpack_from(end + "I", data, 28)[0]
        phentsize, phnum = struct.unpack_from(end + "HH", data, 42)
    static = True
    for i in range(phnum):
        off = phoff + i * phentsize
        if off + 4 <= len(data) and struct.unpack_from(end + "I", data, off)[0] == PT_INTERP:
            static = False
    return Binary("ELF", ELF_MACHINES.get(machine, str(machine)), static)


def read(path: Path) -> Binary:
    """The header of ``path`` (the first 64 KiB are enough for the program headers of a normal ELF)."""
    with open(path, "rb") as f:
        data = f.read(65536)
    if data[:4] == b"\x7fELF" and len(data) >= 64:
        return _elf(data)
    if data[:2] == b"MZ" and len(data) >= 64:
        pe = struct.unpack_from("<I", data, 0x3C)[0]
        if data[pe : pe + 4] == b"PE\0\0":
            machine = struct.unpack_from("<H", data, pe + 4)[0]
            return Binary("PE", PE_MACHINES.get(machine, f"0x{machine:04x}"))
    return Binary("other", None)


def mismatch(binary: Binary, target: str) -> str | None:
    """Why ``binary`` is not a program for ``target`` (None: it is)."""
    t = Target.parse(target)
    if binary.format != t.binary_format:
        return f"is {binary.format} ({binary.machine or '?'}), a {target} program is {t.binary_format}"
    if binary.machine != t.arch:
        return f"is {binary.format} for {binary.machine}, the target is {t.arch}"
    return None


__all__ = ["Binary", "mismatch", "read"]
