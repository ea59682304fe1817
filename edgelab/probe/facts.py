"""Typed device facts: what a device *is*, kept in one model so every downstream rule reads the same names.

Parsers fill fragments of this model; :func:`merge` combines fragments from several commands, keeping
which command gave which fact (provenance) and a warning wherever two commands disagree.
Memory pools are separate entries, never one "RAM" number: physical RAM, available, swap, a WSL
quota, a pagefile and each GPU's VRAM are different budgets (DESIGN §2, §5b).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Identity:
    vendor: str | None = None
    model: str | None = None
    board: str | None = None  # Android ro.product.board, device-tree board ...
    device: str | None = None  # Android ro.product.device (the codename: dipper, cepheus ...)
    hostname: str | None = None
    soc_vendor: str | None = None
    soc_part: str | None = None  # SM8750, tegra234, X1E-78-100 ... kept raw when unknown
    soc_name: str | None = None  # marketing name from the tables, None when the part is unknown
    board_platform: str | None = None  # Android ro.board.platform (pineapple, sun, ...)
    module_pnumber: str | None = None  # Jetson module P-number (p3701-0005)
    module_name: str | None = None
    carrier_pnumber: str | None = None


@dataclass
class OSInfo:
    family: str | None = None  # linux | android | windows
    distro: str | None = None
    distro_version: str | None = None
    kernel: str | None = None
    arch: str | None = None  # normalized: aarch64 | x86_64 | arm | x86
    l4t_version: str | None = None
    jetpack: str | None = None  # None when no table entry: see warnings
    android_release: str | None = None
    android_sdk: int | None = None
    windows_build: str | None = None
    windows_version: str | None = None
    is_wsl: bool | None = None
    wsl_generation: int | None = None
    wsl_version: str | None = None


@dataclass
class CpuCluster:
    cpus: list[int] = field(default_factory=list)
    max_khz: int | None = None
    core_name: str | None = None


@dataclass
class CPU:
    arch: str | None = None
    vendor: str | None = None
    model: str | None = None
    logical_cores: int | None = None
    physical_cores: int | None = None
    sockets: int | None = None
    clusters: list[CpuCluster] = field(default_factory=list)  # big first
    core_names: list[str] = field(default_factory=list)
    features: list[str] = field(
        default_factory=list
    )  # normalized: neon, fp16, dotprod, i8mm, bf16, sve, avx2 ...
    raw_flags: list[str] = field(default_factory=list)


@dataclass
class MemoryPool:
    kind: str = "ram"  # ram | available | swap | wsl_quota | host_ram | pagefile | vram | commit
    total_bytes: int | None = None
    used_bytes: int | None = None
    free_bytes: int | None = None
    cached_bytes: int | None = None  # swap cached in RAM (tegrastats "SWAP a/bMB (cached cMB)")
    device: str | None = None  # the GPU a VRAM pool belongs to


@dataclass
class Memory:
    pools: list[MemoryPool] = field(default_factory=list)
    unified: bool | None = None  # CPU and GPU/NPU share the RAM (Jetson, phones, Snapdragon PCs)


@dataclass
class GpuProcess:
    """One row of nvidia-smi's processes table."""

    pid: int | None = None
    type: str | None = None  # C (compute), G (graphics), C+G, M ...
    name: str | None = None  # as printed (Windows paths arrive cut to "...name.exe")
    memory_mib: int | None = None  # None: "N/A" (WDDM does not account per process)
    gpu_instance: str | None = None  # MIG GI/CI ("N/A" without MIG)
    compute_instance: str | None = None


@dataclass
class Accelerator:
    kind: str = "gpu"  # cpu | gpu | npu
    vendor: str | None = None
    name: str | None = None
    apis: list[str] = field(
        default_factory=list
    )  # "CUDA sm_87", "Vulkan", "OpenCL", "QNN HTP v79", "DirectML"
    cuda_arch: str | None = None
    driver_version: str | None = None
    memory_bytes: int | None = None
    bus_id: str | None = None
    usable: bool | None = None  # None: not known yet
    reason: str | None = None
    # state at probe time, as the vendor tool printed it (nvidia-smi's table or -q -x)
    temperature_c: float | None = None
    power_draw_w: float | None = None
    power_cap_w: float | None = None
    fan_pct: int | None = None  # None: "N/A" (passively cooled, laptop, Jetson)
    perf_state: str | None = None  # P0 ... P12
    utilization_pct: int | None = None
    mig_mode: str | None = None  # Enabled | Disabled | N/A (not MIG-capable)
    mig_devices: int | None = None  # MIG instances listed under "MIG devices:"
    processes: list[GpuProcess] | None = None  # [] when the tool says "No running processes found"


@dataclass
class Battery:
    level_pct: float | None = None
    status: str | None = None
    plugged: str | None = None
    temperature_c: float | None = None
    voltage_mv: int | None = None
    technology: str | None = None


@dataclass
class Power:
    power_mode: str | None = None
    power_mode_id: int | None = None
    temperatures_c: dict[str, float] = field(default_factory=dict)
    rails_mw: dict[str, int] = field(default_factory=dict)  # current reading
    rails_avg_mw: dict[str, int] = field(default_factory=dict)  # the tool's running average
    rails_peak_mw: dict[str, int] = field(default_factory=dict)  # third figure (Thor, JetPack 7.2)
    battery: Battery | None = None


@dataclass
class Engine:
    """A hardware engine at probe time (tegrastats: GR3D, EMC, NVENC, NVDLA0, VIC, PVA0 ...):
    utilisation and clock are separate facts, and an engine printed ``off`` stays in the list."""

    name: str = ""  # as printed, without the _FREQ suffix (GR3D, NVENC0, NVDLA1)
    load_pct: float | None = None
    mhz: list[int] = field(default_factory=list)  # one per GPC/instance; empty: no clock printed
    on: bool | None = None  # False: printed "off"


@dataclass
class Facts:
    identity: Identity = field(default_factory=Identity)
    os: OSInfo = field(default_factory=OSInfo)
    cpu: CPU = field(default_factory=CPU)
    memory: Memory = field(default_factory=Memory)
    accelerators: list[Accelerator] = field(default_factory=list)
    power: Power = field(default_factory=Power)
    engines: list[Engine] = field(default_factory=list)
    software: dict[str, str] = field(default_factory=dict)  # cuda, cudnn, tensorrt, python ... as reported
    provenance: dict[str, str] = field(default_factory=dict)  # "os.kernel" -> "uname -a"
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Facts:
        return _from_dict(cls, data or {})

    def pools(self, kind: str) -> list[MemoryPool]:
        return [p for p in self.memory.pools if p.kind == kind]


def _from_dict(tp: Any, data: Any) -> Any:
    """Rebuild nested dataclasses; unknown keys are ignored so older snapshots stay readable."""
    if data is None:
        return None
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if isinstance(data, dict) and f.name in data:
                kwargs[f.name] = _from_dict(hints[f.name], data[f.name])
        return tp(**kwargs)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _from_dict(inner[0], data) if len(inner) == 1 else data
    if origin is list:
        return [_from_dict(args[0], x) for x in data] if isinstance(data, list) else []
    if origin is dict:
        return dict(data) if isinstance(data, dict) else {}
    return data


def _is_empty(value: Any) -> bool:
    return value is None or value == [] or value == {} or value == ""


def _merge_into(dst: Any, src: Any, path: str, source: str, out: Facts) -> None:
    for f in dataclasses.fields(dst):
        name = f.name
        key = f"{path}.{name}" if path else name
        new = getattr(src, name)
        old = getattr(dst, name)
        if _is_empty(new):
            continue
        if dataclasses.is_dataclass(new):
            if old is None:
                setattr(dst, name, new)
                out.provenance.setdefault(key, source)
            else:
                _merge_into(old, new, key, source, out)
        elif isinstance(new, list):
            if name == "features" or name == "raw_flags" or name == "core_names" or name == "apis":
                merged = list(old) + [x for x in new if x not in old]
                setattr(dst, name, merged)
            elif _is_empty(old):
                setattr(dst, name, list(new))
            out.provenance.setdefault(key, source)
        elif isinstance(new, dict):
            merged = dict(old)
            for k, v in new.items():
                merged.setdefault(k, v)
            setattr(dst, name, merged)
            out.provenance.setdefault(key, source)
        elif _is_empty(old):
            setattr(dst, name, new)
            out.provenance[key] = source
        elif old != new:
            first = source_of(out.provenance, key)
            out.warnings.append(f"{key}: {first} says {old!r}, {source} says {new!r}; kept the first")


def source_of(provenance: dict[str, str], key: str) -> str:
    """The command that gave ``key``, or the nearest enclosing fact's (a battery or an accelerator
    arrives whole, so ``power.battery.level_pct`` is ``power.battery``'s)."""
    while key:
        if key in provenance:
            return provenance[key]
        key = key.rsplit(".", 1)[0] if "." in key else ""
    return "an earlier command"


def _same_accelerator(a: Accelerator, b: Accelerator) -> bool:
    if a.bus_id and b.bus_id:
        return a.bus_id == b.bus_id
    if a.kind != b.kind:
        return False
    an, bn = (a.name or "").rstrip(". "), (b.name or "").rstrip(". ")
    return bool(an and bn and (an.startswith(bn) or bn.startswith(an)))


def merge(fragments: list[tuple[str, Facts]]) -> Facts:
    """Combine per-command fragments in order: the first command to state a fact wins, later
    disagreements become warnings, and ``provenance`` records which command gave each fact."""
    out = Facts()
    for source, frag in fragments:
        frag_accels = frag.accelerators
        frag_pools = frag.memory.pools
        shallow = dataclasses.replace(
            frag,
            accelerators=[],
            memory=dataclasses.replace(frag.memory, pools=[]),
            provenance={},
            warnings=[],
        )
        _merge_into(out, shallow, "", source, out)
        for acc in frag_accels:
            idx = next((i for i, a in enumerate(out.accelerators) if _same_accelerator(a, acc)), None)
            if idx is None:
                out.accelerators.append(dataclasses.replace(acc, apis=list(acc.apis)))
                out.provenance.setdefault(f"accelerators[{len(out.accelerators) - 1}]", source)
            else:
                twin = out.accelerators[idx]
                if acc.name and twin.name and len(acc.name.rstrip(".")) > len(twin.name.rstrip(".")):
                    twin.name = acc.name  # a full name beats a truncated table cell
                _merge_into(twin, dataclasses.replace(acc, name=None), f"accelerators[{idx}]", source, out)
        for pool in frag_pools:
            if not any(p.kind == pool.kind and p.device == pool.device for p in out.memory.pools):
                out.memory.pools.append(dataclasses.replace(pool))
                out.provenance.setdefault(
                    f"memory.{pool.kind}" + (f"[{pool.device}]" if pool.device else ""), source
                )
        out.warnings.extend(f"{source}: {w}" for w in frag.warnings)
        for k, v in frag.provenance.items():
            out.provenance.setdefault(k, v)
    return out
