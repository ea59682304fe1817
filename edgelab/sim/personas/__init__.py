"""Virtual-device personas: one directory each, described by its ``persona.yaml``.

A persona dir holds ``persona.yaml`` (name, transport, address or port,
device_class, shell, description, ``files:`` with the source of every overlaid
file), ``root/`` (files shown at the same absolute path on the device) and
``bin/`` (shim commands first on PATH). Both labs (sshd, ADB emulator) read
them through this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from edgelab.errors import ConfigError, NotFound

PERSONAS_DIR = Path(__file__).parent
TRANSPORTS = ("ssh", "adb")
SHELLS = ("posix", "toybox", "powershell")
DEVICE_CLASSES = ("jetson", "cuda_discrete", "x86_cpu", "arm64_cpu", "npu_phone")
ARCHES = ("x86_64", "aarch64")  # the device's CPU: an aarch64 persona runs aarch64 ELFs under qemu


@dataclass(frozen=True)
class Persona:
    """A parsed ``persona.yaml`` plus where its directory is."""

    name: str
    transport: str
    device_class: str
    shell: str
    description: str
    path: Path
    address: str | None = None
    port: int | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    arch: str = "x86_64"

    @property
    def root(self) -> Path:
        return self.path / "root"

    @property
    def bin(self) -> Path:
        return self.path / "bin"


def _require(data: dict, key: str, source: Path) -> Any:
    if key not in data or data[key] in (None, ""):
        raise ConfigError(
            f"{source}: missing '{key}'", remedy="see edgelab/sim/personas/__init__.py for the format"
        )
    return data[key]


def load_persona_dir(path: Path) -> Persona:
    """Parse and validate ``path/persona.yaml``."""
    source = Path(path) / "persona.yaml"
    try:
        data = yaml.safe_load(source.read_text()) or {}
    except FileNotFoundError:
        raise NotFound(f"{source} does not exist", remedy="every persona dir needs a persona.yaml") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: {e}", remedy="fix the YAML syntax") from None
    transport = _require(data, "transport", source)
    if transport not in TRANSPORTS:
        raise ConfigError(f"{source}: transport {transport!r} is not one of {TRANSPORTS}")
    shell = data.get("shell", "toybox" if transport == "adb" else "posix")
    if shell not in SHELLS:
        raise ConfigError(f"{source}: shell {shell!r} is not one of {SHELLS}")
    arch = str(data.get("arch") or "x86_64")
    if arch not in ARCHES:
        raise ConfigError(f"{source}: arch {arch!r} is not one of {ARCHES}")
    device_class = _require(data, "device_class", source)
    if device_class not in DEVICE_CLASSES:
        raise ConfigError(f"{source}: device_class {device_class!r} is not one of {DEVICE_CLASSES}")
    return Persona(
        name=str(_require(data, "name", source)),
        transport=transport,
        device_class=device_class,
        shell=shell,
        description=str(data.get("description", "")).strip(),
        path=Path(path).resolve(),
        address=data.get("address"),
        port=int(data["port"]) if data.get("port") is not None else None,
        files=list(data.get("files") or []),
        raw=data,
        arch=arch,
    )


def list_personas(transport: str | None = None) -> list[Persona]:
    """Every persona shipped with edgelab, optionally only one transport's, ordered by address/port."""
    found = [load_persona_dir(p.parent) for p in sorted(PERSONAS_DIR.glob("*/persona.yaml"))]
    if transport:
        found = [p for p in found if p.transport == transport]
    return sorted(
        found, key=lambda p: (p.transport, tuple(int(x) for x in (p.address or "0").split(".")), p.port or 0)
    )


def load_persona(name: str) -> Persona:
    """The shipped persona called ``name``."""
    path = PERSONAS_DIR / name
    if not (path / "persona.yaml").is_file():
        known = ", ".join(p.name for p in list_personas())
        raise NotFound(f"no persona named {name!r}", remedy=f"known personas: {known}")
    return load_persona_dir(path)
