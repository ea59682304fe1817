"""/proc/cpuinfo: x86 ``flags``, ARM ``Features``, the old Android ``Processor``/``Hardware`` format,
tab- or space-aligned, CRLF. Features are kept only when every core has them (big.LITTLE kernels
can list fewer on the little cores), then mapped to the names deploy rules use."""

from __future__ import annotations

import re
from collections import Counter

from edgelab.probe import tables
from edgelab.probe.facts import CpuCluster
from edgelab.probe.parsers.base import ParseResult, parser, to_int

# normalized feature -> any of these raw flags (ARM hwcaps, x86 cpuid flags)
FEATURE_MAP: dict[str, tuple[str, ...]] = {
    "neon": ("asimd", "neon"),
    "fp16": ("asimdhp", "fphp"),
    "dotprod": ("asimddp",),
    "i8mm": ("i8mm",),
    "bf16": ("bf16",),
    "sve": ("sve",),
    "sve2": ("sve2",),
    "sme": ("sme",),
    "sme2": ("sme2",),
    "atomics": ("atomics",),
    "fhm": ("asimdfhm",),
    "sse4_2": ("sse4_2",),
    "avx": ("avx",),
    "avx2": ("avx2",),
    "fma": ("fma",),
    "f16c": ("f16c",),
    "avx512": ("avx512f",),
    "avx512_vnni": ("avx512_vnni",),
    "avx512_bf16": ("avx512_bf16",),
    "avx512_fp16": ("avx512_fp16",),
    "avx_vnni": ("avx_vnni",),
    "amx": ("amx_tile",),
    "amx_bf16": ("amx_bf16",),
    "amx_int8": ("amx_int8",),
}


def normalize_features(flags: list[str] | set[str]) -> list[str]:
    have = {f.lower() for f in flags}
    out = [name for name, raws in FEATURE_MAP.items() if any(r in have for r in raws)]
    if "avx512_bf16" in out or "amx_bf16" in out:
        out.append("bf16")
    return sorted(set(out))


def _blocks(text: str) -> list[list[tuple[str, str]]]:
    blocks: list[list[tuple[str, str]]] = [[]]
    for line in text.split("\n"):
        if not line.strip():
            if blocks[-1]:
                blocks.append([])
            continue
        if ":" not in line:
            continue
        k, _, val = line.partition(":")
        blocks[-1].append((k.strip(), val.strip()))
    return [b for b in blocks if b]


@parser("cat /proc/cpuinfo")
def parse_cpuinfo(text: str, res: ParseResult) -> None:
    v, f = res.values, res.facts
    cores: list[dict[str, str]] = []
    shared: dict[str, str] = {}
    for block in _blocks(text):
        # A block may also start mid-way with another 'processor' line (no blank separator).
        cur: dict[str, str] | None = None
        for k, val in block:
            if k == "processor" and to_int(val) is not None:
                cur = {"processor": val}
                cores.append(cur)
            elif cur is not None and k not in ("Hardware", "Revision", "Serial"):
                cur.setdefault(k, val)
            else:
                shared.setdefault(k, val)
    if not cores and not shared:
        return
    if "Processor" in shared:
        v["processor_string"] = shared["Processor"]
    if "Hardware" in shared:
        v["hardware"] = shared["Hardware"]
    for key in ("Revision", "Serial", "Model"):
        if key in shared:
            v[key.lower()] = shared[key]
    v["cpu_count"] = len(cores)
    f.cpu.logical_cores = len(cores) or None

    def first(key: str) -> str | None:
        for c in cores:
            if key in c:
                return c[key]
        return shared.get(key)

    def counts(key: str) -> Counter:
        return Counter(c[key] for c in cores if key in c)

    impls = counts("CPU implementer")
    parts = counts("CPU part")
    if len(impls) == 1:
        v["cpu_implementer"] = next(iter(impls))
    elif impls:
        v["cpu_implementers"] = dict(impls)
    if len(parts) == 1:
        v["cpu_part"] = next(iter(parts))
    if parts:
        v["cpu_parts"] = dict(parts)
    for key, out in (
        ("model name", "model_name"),
        ("BogoMIPS", "bogomips"),
        ("bogomips", "bogomips"),
        ("MTS version", "mts_version"),
        ("vendor_id", "vendor_id"),
        ("cpu family", "cpu_family"),
        ("model", "model"),
        ("cpu MHz", "cpu_mhz"),
        ("microcode", "microcode"),
    ):
        val = first(key)
        if val is not None and out not in v:
            v[out] = to_int(val) if out in ("cpu_family", "model") and to_int(val) is not None else val
    flag_sets = [
        set(c.get("Features", c.get("flags", "")).split()) for c in cores if "Features" in c or "flags" in c
    ]
    if not flag_sets and ("Features" in shared or "flags" in shared):
        flag_sets = [set(shared.get("Features", shared.get("flags", "")).split())]
    if flag_sets:
        common = set.intersection(*flag_sets)
        v["features"] = sorted(common)
        if len({frozenset(s) for s in flag_sets}) > 1:
            v["features_partial"] = sorted(set.union(*flag_sets) - common)
            res.warnings.append("cores list different Features; kept those common to all cores")
        f.cpu.raw_flags = sorted(common)
        f.cpu.features = normalize_features(common)
    # physical topology (x86)
    phys = {(c.get("physical id"), c.get("core id")) for c in cores if "core id" in c}
    if phys:
        f.cpu.physical_cores = len(phys)
        f.cpu.sockets = len({p for p, _ in phys})
    is_arm = bool(impls) or "Features" in (cores[0] if cores else shared)
    if is_arm:
        f.cpu.arch = (
            "aarch64"
            if ("asimd" in v.get("features", []) or "AArch64" in str(v.get("processor_string", "")))
            or any(c.get("CPU architecture", "").strip() == "8" for c in cores)
            else "arm"
        )
        impl = v.get("cpu_implementer") or (next(iter(impls)) if impls else None)
        f.cpu.vendor = tables.arm_implementer(impl) or impl
        names: list[str] = []
        by_name: dict[str, list[int]] = {}
        for i, c in enumerate(cores):
            name = tables.arm_core(c.get("CPU implementer"), c.get("CPU part"))
            label = name or f"{c.get('CPU implementer', '?')}:{c.get('CPU part', '?')}"
            if name is None and c.get("CPU part"):
                msg = f"unknown ARM core {label} (kept raw)"
                if msg not in res.warnings:
                    res.warnings.append(msg)
            if label not in names:
                names.append(label)
            by_name.setdefault(label, []).append(to_int(c.get("processor", "")) or i)
        f.cpu.core_names = names
        if names:
            v["core_names"] = names
        if len(by_name) > 1:
            f.cpu.clusters = [CpuCluster(cpus=cpus, core_name=n) for n, cpus in by_name.items()]
        f.cpu.model = v.get("model_name") or (" + ".join(names) if names else None)
        hw = v.get("hardware") or ""
        part = tables.find_qualcomm_part(hw)
        if part:
            row = tables.qualcomm_part(part)
            f.identity.soc_vendor, f.identity.soc_part = "Qualcomm", part
            f.identity.soc_name = row["name"] if row else None
        elif hw:
            f.identity.soc_part = hw
    else:
        f.cpu.arch = "x86_64" if "lm" in v.get("features", []) else (f.cpu.arch if not cores else "x86")
        f.cpu.vendor = v.get("vendor_id")
        f.cpu.model = v.get("model_name")
    if re.search(r"\bprocessor\s*:", text) is None:
        res.warnings.append("no 'processor : N' lines: per-core data missing")
