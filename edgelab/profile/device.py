"""Device-level profile rules: memory pools and the budget pool, threads, dtype, backends, runtime target.

Each function records the rule it applied (:class:`Rule`) so ``edgelab profile --explain`` can say
why a profile looks the way it does. All functions are pure over Facts and the catalog entry.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from edgelab.catalog.devices import DeviceEntry
from edgelab.probe.facts import CpuCluster, Facts
from edgelab.profile.budget import WMI_SATURATED, Pool
from edgelab.profile.defaults import GIB
from edgelab.units import gib


@dataclass
class Rule:
    name: str
    inputs: dict[str, Any]
    result: Any
    why: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Rules:
    items: list[Rule] = field(default_factory=list)

    def fire(self, name: str, inputs: dict[str, Any], result: Any, why: str) -> Any:
        self.items.append(Rule(name, inputs, result, why))
        return result


def _gib(n: int | None) -> str:
    return gib(n, missing="?")


def memory_pools(
    facts: Facts, device_class: str, entry: DeviceEntry | None, rules: Rules
) -> tuple[list[Pool], Pool | None]:
    """All pools from the facts (kept apart), and the one the budget is computed on."""
    pools: list[Pool] = []
    for p in facts.memory.pools:
        if not p.total_bytes or p.kind in ("available", "swap"):
            continue
        name = f"vram:{p.device}" if p.kind == "vram" else p.kind
        if any(x.name == name for x in pools):
            continue
        pools.append(Pool(name, p.kind, p.total_bytes, f"facts memory.pools[{p.kind}]"))
    unified = (
        facts.memory.unified if facts.memory.unified is not None else device_class in ("jetson", "npu_phone")
    )
    if not unified:
        for a in facts.accelerators:
            if a.kind != "gpu" or not a.memory_bytes or any(p.kind == "vram" for p in pools):
                continue
            if a.memory_bytes >= WMI_SATURATED:
                rules.fire(
                    "vram_from_adapter_ram",
                    {"gpu": a.name, "adapter_ram": a.memory_bytes},
                    None,
                    "Win32 AdapterRAM saturates at 4 GiB: not used as the VRAM size",
                )
                continue
            pools.append(Pool(f"vram:{a.name}", "vram", a.memory_bytes, f"accelerator {a.name} memory"))
    rules.fire(
        "memory_pools",
        {"unified": unified},
        [f"{p.name}={_gib(p.total_bytes)}" for p in pools],
        "pools kept apart; unified memory is one RAM pool shared by CPU, GPU and NPU"
        if unified
        else "pools kept apart: RAM, WSL quota, commit and each GPU's VRAM are different budgets",
    )

    nominal = entry.capabilities.get("memory_gb") if entry else None
    chosen: Pool | None = None
    if device_class == "cuda_discrete":
        vram = sorted((p for p in pools if p.kind == "vram"), key=lambda p: p.total_bytes, reverse=True)
        if vram:
            chosen = vram[0]
            why = "discrete GPU: weights and KV live in the largest GPU's VRAM"
        elif nominal:
            chosen = Pool("vram:catalog", "vram", int(nominal * GIB), f"catalog {entry.id} memory_gb")  # type: ignore[union-attr]
            pools.append(chosen)
            why = "no VRAM size in the facts: the catalog entry's nominal VRAM"
        else:
            why = "discrete GPU without a known VRAM size"
    else:
        by_kind = {p.kind: p for p in pools}
        if facts.os.is_wsl and "wsl_quota" in by_kind:
            chosen, why = by_kind["wsl_quota"], "WSL: the VM's memory quota, not the host RAM"
        elif "ram" in by_kind:
            chosen = by_kind["ram"]
            why = (
                "unified memory: RAM counted once for CPU, GPU and NPU"
                if unified
                else "CPU inference: physical RAM"
                + (" (inside WSL this is the VM quota)" if facts.os.is_wsl else "")
            )
        elif nominal:
            chosen = Pool("ram:catalog", "ram", int(nominal * GIB), f"catalog {entry.id} memory_gb")  # type: ignore[union-attr]
            pools.append(chosen)
            why = "no RAM in the facts: the catalog entry's nominal memory"
        else:
            why = "no RAM size in the facts and none in the catalog"
    rules.fire(
        "budget_pool",
        {"class": device_class, "pools": [p.name for p in pools]},
        f"{chosen.name}={_gib(chosen.total_bytes)}" if chosen else None,
        why,
    )
    return pools, chosen


LITTLE_RATIO = (
    0.75  # a cluster clocked below 75 % of the fastest is a LITTLE cluster (A55 1.9 vs A78 2.7 GHz)
)


def _is_little(cluster: CpuCluster, top_khz: int) -> bool:
    name = (cluster.core_name or "").lower()
    if name:
        return bool(re.search(r"cortex-a5\d", name))
    return bool(top_khz) and (cluster.max_khz or 0) < LITTLE_RATIO * top_khz


def _cluster(c: CpuCluster) -> str:
    ghz = f" at {c.max_khz / 1e6:.2f} GHz" if c.max_khz else ""
    return f"{len(c.cpus)}x {c.core_name or 'core'}{ghz}"


def threads(facts: Facts, rules: Rules) -> tuple[int | None, list[int]]:
    """Big clusters first (cpufreq max frequency); LITTLE clusters left out; else physical cores."""
    clusters = sorted((c for c in facts.cpu.clusters if c.cpus), key=lambda c: c.max_khz or 0, reverse=True)
    if clusters:
        top = clusters[0].max_khz or 0
        use = [c for c in clusters if not _is_little(c, top)] or clusters[:1]
        left = [c for c in clusters if c not in use]
        cpus = [cpu for c in use for cpu in c.cpus]
        desc = [_cluster(c) for c in clusters]
        why = "big clusters first from cpufreq max frequency"
        if left:
            why += "; LITTLE cluster(s) left out: " + ", ".join(_cluster(c) for c in left)
        else:
            why += "; no LITTLE cluster"
        return rules.fire("threads", {"clusters": desc}, len(cpus), why), cpus
    if facts.cpu.physical_cores:
        return rules.fire(
            "threads",
            {"physical_cores": facts.cpu.physical_cores},
            facts.cpu.physical_cores,
            "no cpufreq clusters: fallback to physical cores (SMT siblings do not help matmul)",
        ), []
    if facts.cpu.logical_cores:
        return rules.fire(
            "threads",
            {"logical_cores": facts.cpu.logical_cores},
            facts.cpu.logical_cores,
            "no cpufreq clusters or physical core count: all logical cores",
        ), []
    return rules.fire("threads", {}, None, "CPU topology unknown: the runtime's own default"), []


_GPU_CLASSES = ("cuda_discrete", "jetson")


def _cuda_arch(facts: Facts, entry: DeviceEntry | None) -> str | None:
    arch = next((a.cuda_arch for a in facts.accelerators if a.cuda_arch), None)
    return arch or (entry.capabilities.get("cuda_arch") if entry else None)


def dtype(facts: Facts, device_class: str, entry: DeviceEntry | None, rules: Rules) -> str:
    """bf16 where the compute unit supports it, else fp16 on a GPU, fp32 on a CPU."""
    if device_class in _GPU_CLASSES:
        arch = _cuda_arch(facts, entry)
        num = int(arch.split("_")[1]) if arch and arch.split("_")[-1].isdigit() else None
        if num is not None and num >= 80:
            return rules.fire("dtype", {"cuda_arch": arch}, "bf16", "CUDA sm_80 and newer compute in bf16")
        return rules.fire(
            "dtype",
            {"cuda_arch": arch},
            "fp16",
            "GPU without known bf16 support (CUDA arch below sm_80 or unknown): fp16",
        )
    if device_class == "npu_phone":
        return rules.fire(
            "dtype",
            {"class": device_class},
            "fp16",
            "phone GPU/NPU paths (Adreno OpenCL, QNN HTP) compute in fp16, not bf16",
        )
    feats = set(facts.cpu.features)
    cpu_bf16 = bool(feats & {"bf16", "avx512_bf16", "amx", "amx_bf16"})
    cap = entry.capabilities.get("bf16") if entry else None
    if cpu_bf16 or cap:
        return rules.fire(
            "dtype",
            {"cpu_features": sorted(feats & {"bf16", "avx512_bf16", "amx", "amx_bf16"}), "catalog_bf16": cap},
            "bf16",
            "CPU with bf16 instructions",
        )
    return rules.fire(
        "dtype", {"cpu_features": sorted(feats)[:12]}, "fp32", "CPU without bf16 instructions: fp32"
    )


def backends(facts: Facts, device_class: str, entry: DeviceEntry | None, rules: Rules) -> list[str]:
    """Compute backends from the accelerators the facts show plus the catalog's capabilities."""
    caps = entry.capabilities if entry else {}
    apis = " ".join(api for a in facts.accelerators if a.usable is not False for api in a.apis).lower()
    names = [a.name or "" for a in facts.accelerators if a.usable is not False]
    seen: dict[str, str] = {}

    def add(name: str, why: str) -> None:
        seen.setdefault(name, why)

    if "cuda" in apis or any(a.cuda_arch for a in facts.accelerators) or caps.get("cuda_arch"):
        add("CUDA", f"CUDA {_cuda_arch(facts, entry) or ''}".strip())
    if "qnn" in apis or caps.get("qnn_htp"):
        add("QNN", f"Hexagon HTP {caps.get('qnn_htp') or ''}".strip())
    if "xdna" in apis or str(caps.get("npu", "")).upper().startswith("XDNA"):
        add("XDNA", "AMD NPU (Ryzen AI)")
    if "opencl" in apis or caps.get("opencl"):
        add("OpenCL", "OpenCL GPU (Adreno)")
    if "vulkan" in apis or caps.get("vulkan"):
        add("Vulkan", "Vulkan GPU")
    if facts.os.family == "windows" and ("directml" in apis or caps.get("directml")):
        add("DirectML", "DirectX 12 GPU/NPU on Windows")
    arch = facts.os.arch or facts.cpu.arch
    feats = set(facts.cpu.features)
    if arch in ("aarch64", "arm"):
        flavour = "KleidiAI, XNNPACK" if feats & {"i8mm", "dotprod"} or not feats else "XNNPACK"
        add(
            f"CPU ({flavour})",
            f"arm64 CPU features: {', '.join(sorted(feats & {'neon', 'dotprod', 'i8mm', 'sve', 'bf16'})) or 'unknown'}",
        )
    else:
        simd = [f for f in ("avx512", "avx2") if f in feats]
        add(
            f"CPU ({simd[0].upper()})" if simd else "CPU", "x86 CPU" if arch else "CPU (architecture unknown)"
        )
    order = list(seen)
    if device_class == "npu_phone":
        order.sort(key=lambda b: {"QNN": 0, "OpenCL": 1, "Vulkan": 2}.get(b, 3))
    result = rules.fire(
        "backends",
        {"accelerators": names, "capabilities": sorted(caps)},
        order,
        "; ".join(f"{k}: {v}" for k, v in seen.items()),
    )
    return result


def runtime_target(
    facts: Facts, device_class: str, entry: DeviceEntry | None, rules: Rules
) -> tuple[str | None, list[str]]:
    if entry and entry.runtime_targets:
        return rules.fire(
            "runtime_target",
            {"entry": entry.id, "targets": entry.runtime_targets},
            entry.runtime_targets[0],
            "the catalog entry's first runtime target",
        ), list(entry.runtime_targets)
    fam, arch = facts.os.family, facts.os.arch or facts.cpu.arch
    arch_s = {
        "aarch64": "arm64" if fam in ("android", "windows") else "aarch64",
        "x86_64": "x64" if fam == "windows" else "x86_64",
    }.get(arch or "", arch)
    if not fam or not arch_s:
        return rules.fire(
            "runtime_target",
            {"os": fam, "arch": arch},
            None,
            "OS family or architecture unknown: no runtime target",
        ), []
    base = f"{fam}-{arch_s}"
    targets = [base]
    if device_class in _GPU_CLASSES:
        cuda = _cuda_arch(facts, entry)
        gpu = f"{base}-cuda" + (f"-{cuda.replace('_', '')}" if device_class == "jetson" and cuda else "")
        targets.insert(0, gpu)
    return rules.fire(
        "runtime_target",
        {"os": fam, "arch": arch, "class": device_class},
        targets[0],
        "generic target from OS, architecture and class (no catalog entry)",
    ), targets
