"""What one virtual ADB device is: a persona, a port, a writable root, and whether it refuses auth."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

PERSONAS_DIR = Path(__file__).resolve().parent.parent / "personas"

# What a current adbd advertises that this emulator really implements.
FEATURES = ["shell_v2", "cmd", "stat_v2", "ls_v2", "fixed_push_mkdir"]
DEVICE_DIRS = ("data/local/tmp", "sdcard")


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    persona_dir: Path
    port: int
    device_root: Path
    require_auth: bool = False  # demand AUTH and never accept: adb shows "unauthorized"
    props: dict[str, str] = field(default_factory=dict)

    @property
    def lab_dir(self) -> Path:
        """The ADB lab's directory (``<lab>/devices/NAME`` is the device's root)."""
        return self.device_root.parent.parent

    @property
    def getprop_file(self) -> Path:
        return self.persona_dir / "getprop.txt"

    def banner_props(self) -> dict[str, str]:
        return {
            "ro.product.name": self.props.get("ro.product.name", self.name),
            "ro.product.model": self.props.get("ro.product.model", self.name),
            "ro.product.device": self.props.get("ro.product.device", self.name),
        }


def read_getprop(path: Path) -> dict[str, str]:
    """Parse a ``getprop`` dump (``[key]: [value]`` lines)."""
    props: dict[str, str] = {}
    if not path.is_file():
        return props
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.startswith("[") or "]: [" not in line:
            continue
        key, _, rest = line[1:].partition("]: [")
        props[key] = rest[:-1] if rest.endswith("]") else rest
    return props


def persona_path(persona: str) -> Path:
    path = Path(persona)
    if path.is_dir():
        return path.resolve()
    path = PERSONAS_DIR / persona
    if not (path / "persona.yaml").is_file():
        raise ValueError(f"no ADB persona named {persona!r} in {PERSONAS_DIR}")
    return path


def load_spec(
    name: str, persona: str, port: int, state_dir: Path, *, require_auth: bool = False
) -> DeviceSpec:
    """Build a device and make its writable root (``/data/local/tmp``, ``/sdcard``) exist."""
    pdir = persona_path(persona)
    root = Path(state_dir) / "devices" / name
    for sub in DEVICE_DIRS:
        (root / sub).mkdir(parents=True, exist_ok=True)
    return DeviceSpec(
        name=name,
        persona_dir=pdir,
        port=port,
        device_root=root.resolve(),
        require_auth=require_auth,
        props=read_getprop(pdir / "getprop.txt"),
    )
