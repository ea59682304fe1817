"""Jetson outputs: /etc/nv_tegra_release, device-tree model/compatible, nvpmodel -q, tegrastats,
jetson_release -v and jtop --error-log. The L4T version is always kept, even when no table knows
its JetPack (jetson-stats' top complaint is "JetPack missing" on every new L4T)."""

from __future__ import annotations

import re

from edgelab.probe import tables
from edgelab.probe.facts import Accelerator, Engine, Facts, MemoryPool
from edgelab.probe.parsers import tegrastats
from edgelab.probe.parsers.base import ParseResult, norm_arch, parser

_RELEASE_RE = re.compile(
    r"#\s*R(?P<major>\d+)\s*\((?P<kind>[^)]*)\)\s*,\s*REVISION:\s*(?P<rev>[\d.]+)"
    r"(?:\s*,\s*GCID:\s*(?P<gcid>\d+))?(?:\s*,\s*BOARD:\s*(?P<board>[^,\s]+))?"
    r"(?:\s*,\s*EABI:\s*(?P<eabi>[^,\s]+))?(?:\s*,\s*DATE:\s*(?P<date>.+?))?\s*$",
    re.M,
)


def l4t_version(major: str, revision: str) -> str:
    rev = revision.strip(".")
    if rev.count(".") == 0:
        rev += ".0"
    return f"{int(major)}.{rev}"


def fill_l4t(facts: Facts, res: ParseResult, version: str | None) -> None:
    """L4T -> JetPack from the table; an unknown L4T is kept and said to be unknown, never dropped."""
    if not version:
        return
    facts.os.l4t_version = version
    facts.os.family = facts.os.family or "linux"
    jp = tables.jetpack_for_l4t(version)
    if jp:
        facts.os.jetpack = jp
        facts.provenance["os.jetpack"] = "table l4t_jetpack"
    else:
        res.warnings.append(f"JetPack: unknown for L4T {version} (not in the l4t_jetpack table)")


def _nv_release(text: str, res: ParseResult) -> bool:
    m = _RELEASE_RE.search(text)
    if not m:
        return False
    v = res.values
    v["l4t_major"] = f"R{m['major']}"
    v["l4t_revision"] = m["rev"]
    v["l4t_version"] = l4t_version(m["major"], m["rev"])
    v["release_kind"] = m["kind"].strip()
    if m["gcid"]:
        v["gcid"] = m["gcid"]
    if m["board"]:
        v["board_config"] = m["board"]
    if m["eabi"]:
        v["arch"] = m["eabi"]
    if m["date"]:
        v["build_date"] = m["date"].strip()
    km = re.search(r"^#\s*KERNEL_VARIANT:\s*(\S+)", text, re.M)
    if km:
        v["kernel_variant"] = km[1]
    for key, val in re.findall(r"^(TARGET_USERSPACE_[A-Z_]+)=(.*)$", text, re.M):
        v[key.lower()] = val.strip()
    fill_l4t(res.facts, res, v["l4t_version"])
    res.facts.os.arch = norm_arch(v.get("arch")) or res.facts.os.arch
    res.facts.cpu.arch = res.facts.os.arch
    return True


@parser("cat /etc/nv_tegra_release")
def parse_nv_tegra_release(text: str, res: ParseResult) -> None:
    if not _nv_release(text, res):
        res.warnings.append("no '# R<major> (release), REVISION: ...' line")


def split_compatible(raw: str) -> list[str]:
    """Device-tree compatible is NUL-separated; pasted copies lose the NULs, so also split before
    each 'vendor,' token that follows a non-separator."""
    out: list[str] = []
    for chunk in re.split(r"[\x00\n]+", raw):
        chunk = chunk.strip()
        if not chunk:
            continue
        starts = [m.start() for m in re.finditer(r"[a-z][a-z0-9-]*,", chunk)]
        starts = [s for s in starts if s == 0 or chunk[s - 1] not in "+-_,"]
        if not starts or starts[0] != 0:
            starts = [0] + starts
        bounds = starts + [len(chunk)]
        out.extend(chunk[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if chunk[a:b])
    return out


def fill_compatible(res: ParseResult, raw: str) -> None:
    entries = split_compatible(raw)
    if not entries:
        return
    v = res.values
    v["compatible"] = " ".join(entries)
    v["compatible_list"] = entries
    for e in entries:
        _, _, body = e.partition(",")
        if re.fullmatch(r"tegra\d+\w*", body):
            v.setdefault("soc", body)
        elif re.fullmatch(r"(qcs|sm|sa|sdm|qcm|x1e|x1p)[\w-]+", body):
            v.setdefault("soc", body.upper())
        boards = re.findall(r"p\d{4}-\d{4}", body)
        if "+" in body and len(boards) >= 2:
            v.setdefault("carrier_pnumber", boards[0])
            v.setdefault("module_pnumber", boards[-1])
        elif len(boards) == 1 and "+" not in body:
            v.setdefault("module_pnumber", boards[0])
    fill_jetson_identity(res)


def fill_jetson_identity(res: ParseResult) -> None:
    """SoC and module from the values already read, through the tables; unknown IDs stay raw."""
    v, f = res.values, res.facts
    pn = v.get("module_pnumber") or v.get("pnumber")
    if pn:
        f.identity.module_pnumber = pn
        mod = tables.jetson_module(pn)
        if mod:
            f.identity.module_name = mod["name"]
            v.setdefault("soc", mod.get("soc"))
        else:
            res.warnings.append(f"module P-number {pn} not in the jetson_modules table (kept raw)")
    if v.get("carrier_pnumber"):
        f.identity.carrier_pnumber = v["carrier_pnumber"]
    soc = v.get("soc")
    if soc:
        f.identity.soc_vendor = "NVIDIA" if str(soc).startswith("tegra") else f.identity.soc_vendor
        row = tables.tegra_soc(str(soc))
        f.identity.soc_part = row["soc"] if row else str(soc)
        if row:
            f.identity.soc_name = row["family"]
            f.memory.unified = True
            f.accelerators.append(
                Accelerator(
                    kind="gpu",
                    vendor="NVIDIA",
                    name=f"{row['family']} integrated GPU",
                    apis=[f"CUDA {row['cuda_arch']}"],
                    cuda_arch=row["cuda_arch"],
                )
            )
        elif str(soc).startswith("tegra"):
            res.warnings.append(f"Tegra SoC {soc} not in the tegra_soc table: CUDA arch unknown (kept raw)")


def _model(res: ParseResult, model: str) -> None:
    model = model.strip().strip("\x00").strip()
    if not model:
        return
    res.values["model"] = model
    res.facts.identity.model = model
    if "nvidia" in model.lower() or "jetson" in model.lower():
        res.facts.identity.vendor = "NVIDIA"


@parser("cat /proc/device-tree/model")
def parse_dt_model(text: str, res: ParseResult) -> None:
    line = text.replace("\x00", "\n").strip().split("\n")[0]
    if len(line) > 200:
        res.warnings.append("model line too long; ignored")
        return
    _model(res, line)


@parser("cat /proc/device-tree/compatible")
def parse_dt_compatible(text: str, res: ParseResult) -> None:
    fill_compatible(res, text.strip())


@parser("nvpmodel -q")
def parse_nvpmodel(text: str, res: ParseResult) -> None:
    m = re.search(r"NV Power Mode(?:\[(\d+)\])?\s*:\s*(\S[^\n]*)", text)
    if not m:
        return
    name = m[2].strip()
    res.values["nvpmodel_name"] = name
    mid = m[1]
    if mid is None:
        after = text[m.end() :].strip().split("\n")
        mid = after[0].strip() if after and after[0].strip().isdigit() else None
    if mid is not None:
        res.values["nvpmodel_id"] = int(mid)
    res.facts.power.power_mode = name
    res.facts.power.power_mode_id = res.values.get("nvpmodel_id")


def _engine_key(name: str) -> str:
    """'GR3D_FREQ' -> 'gr3d', 'NVENC0_FREQ' -> 'nvenc0', 'VIC' -> 'vic': the flat-view stem."""
    return re.sub(r"_FREQ$", "", name).lower()


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else x


@parser("tegrastats")
def parse_tegrastats(text: str, res: ParseResult) -> None:
    """One tegrastats line (the last complete one when several are given), every field through
    the one grammar (:mod:`edgelab.probe.parsers.tegrastats`): engines with utilisation and clock
    apart (``off`` kept), rails with their average (and peak), swap with its cache."""
    lines = [ln for ln in text.split("\n") if "RAM " in ln]
    g = tegrastats.parse_line(lines[-1]) if lines else None
    if g is None:
        return
    v, f = res.values, res.facts
    mib = 1024 * 1024
    for key in ("timestamp", "lfb_blocks", "mts_fg_pct", "mts_bg_pct"):
        if key in g:
            v[key] = g[key]
    for key in ("ram_used_mb", "ram_total_mb", "lfb_block_mb", "swap_used_mb", "swap_total_mb"):
        if key in g:
            v[key] = _number(g[key])
    for key in ("swap_cached_mb", "iram_used_kb", "iram_total_kb", "iram_lfb_kb"):
        if key in g:
            v[key] = _number(g[key])
    if "ram_total_mb" in g:
        f.memory.pools.append(
            MemoryPool(
                kind="ram", total_bytes=int(g["ram_total_mb"] * mib), used_bytes=int(g["ram_used_mb"] * mib)
            )
        )
        f.memory.unified = True
    if "swap_total_mb" in g:
        cached = g.get("swap_cached_mb")
        f.memory.pools.append(
            MemoryPool(
                kind="swap",
                total_bytes=int(g["swap_total_mb"] * mib),
                used_bytes=int(g["swap_used_mb"] * mib),
                cached_bytes=int(cached * mib) if cached is not None else None,
            )
        )
    cores = g.get("cpus") or []
    if cores:
        v["cpu_count"] = len(cores)
        f.cpu.logical_cores = len(cores)
        v["cpu_online"] = sum(1 for c in cores if c.get("online"))
        freqs = [int(c["mhz"]) for c in cores if c.get("mhz") is not None]
        loads = [int(c["load_pct"]) for c in cores if c.get("load_pct") is not None]
        if freqs and len(set(freqs)) == 1:
            v["cpu_freq_mhz_all"] = freqs[0]
        elif freqs:
            v["cpu_freq_mhz"] = freqs
        if loads:
            v["cpu_load_pct"] = loads
    for name in ("EMC_FREQ", "GR3D_FREQ"):  # the raw token too, as earlier snapshots keep it
        if m := re.search(rf"\b{name} (\S+)", lines[-1]):
            v[name.lower()] = m[1]
    for name, eng in g["engines"].items():
        key = _engine_key(name)
        clocks = eng.get("mhz")
        mhz = [int(x) for x in clocks] if isinstance(clocks, list) else ([int(clocks)] if clocks else [])
        load = eng.get("load_pct")
        off = eng.get("state") == "off"
        if load is not None:
            v[f"{key}_load_pct"] = _number(load)
        if mhz:
            v[f"{key}_mhz"] = mhz[0] if len(mhz) == 1 else mhz
        if off:
            v[f"{key}_state"] = "off"
        f.engines.append(
            Engine(name=re.sub(r"_FREQ$", "", name), load_pct=load, mhz=mhz, on=False if off else True)
        )
    for name, t in g["temps_c"].items():
        v[f"temp_{name.lower()}_c"] = t
        f.power.temperatures_c[name] = t
    if g.get("sensors_off"):
        v["sensors_off"] = list(g["sensors_off"])
    for name, cur in g["rails_mw"].items():
        if name == "NC":
            continue
        avg = g["rails_avg_mw"][name]
        v[f"{name.lower()}_mw"], v[f"{name.lower()}_avg_mw"] = cur, avg
        f.power.rails_mw[name], f.power.rails_avg_mw[name] = cur, avg
        peak = (g.get("rails_peak_mw") or {}).get(name)
        if peak is not None:
            v[f"{name.lower()}_peak_mw"] = peak
            f.power.rails_peak_mw[name] = peak
    if g.get("unparsed"):
        v["unparsed"] = list(g["unparsed"])
        res.warnings.append(f"tokens no tegrastats field matches (kept raw): {' '.join(g['unparsed'])}")


def _dash_fields(text: str) -> dict[str, str]:
    """' - Key: value' lines (jetson_release) -> {key: value}, first occurrence wins."""
    out: dict[str, str] = {}
    for line in text.split("\n"):
        m = re.match(r"^\s*-\s*([^:]+?):\s*(.*)$", line)
        if m:
            out.setdefault(m[1].strip(), m[2].strip())
    return out


_JR_KEYS = {
    "699-level Part Number": "part_number_699",
    "P-Number": "pnumber",
    "Module": "module",
    "SoC": "soc",
    "CUDA Arch BIN": "cuda_arch_bin",
    "Codename": "codename",
    "Machine": "arch",
    "Distribution": "distribution",
    "Release": "kernel",
    "Python": "python",
    "CUDA": "cuda",
    "cuDNN": "cudnn",
    "TensorRT": "tensorrt",
    "VPI": "vpi",
    "Vulkan": "vulkan",
    "OpenCV": "opencv",
    "Model": "model",
    "L4T": "l4t_version",
    "Jetpack": "jetpack",
    "JetPack": "jetpack",
    "Serial Number": "serial_number",
}
_NOT_AVAILABLE = {"not available", "check with sudo", "missing", "n/a", ""}


def _fill_platform(res: ParseResult) -> None:
    v, f = res.values, res.facts
    f.os.family = "linux"
    if v.get("arch"):
        f.os.arch = norm_arch(v["arch"]) or f.os.arch
        f.cpu.arch = f.os.arch
    if v.get("distribution"):
        f.os.distro = v["distribution"]
    if v.get("kernel"):
        f.os.kernel = v["kernel"]
    for lib in ("cuda", "cudnn", "tensorrt", "vpi", "vulkan", "opencv", "python"):
        if v.get(lib):
            f.software[lib] = str(v[lib])


@parser("jetson_release -v")
def parse_jetson_release(text: str, res: ParseResult) -> None:
    v, f = res.values, res.facts
    if m := re.search(r"jetson-stats ([\d.]+)", text):
        v["jetson_stats_version"] = m[1]
    fields = _dash_fields(text)
    for label, key in _JR_KEYS.items():
        if label in fields and key not in v:
            val = fields[label]
            if key == "jetpack":
                jm = re.match(r"([\d.]+)", val)
                v[key] = jm[1] if jm else None
                continue
            v[key] = None if val.lower() in _NOT_AVAILABLE else val
    if re.search(r"^\s*Jetpack missing!?", text, re.M | re.I):
        v["jetpack"] = None
    elif m := re.search(r"Jetpack\s+([\d.]+)\s*\[L4T\s+([\d.]+)\]", text, re.I):
        v["jetpack"] = m[1]
        v.setdefault("l4t_version", m[2])
    if m := re.search(r"NV Power Mode(?:\[(\d+)\])?\s*:\s*(\S[^\n]*)", text):
        v["nvpmodel_name"] = m[2].strip()
        if m[1] is not None:
            v["nvpmodel_id"] = int(m[1])
        f.power.power_mode, f.power.power_mode_id = v["nvpmodel_name"], v.get("nvpmodel_id")
    if v.get("opencv"):
        om = re.match(r"([\d.]+)\s*-\s*with CUDA:\s*(\w+)", v["opencv"])
        if om:
            v["opencv"], v["opencv_cuda"] = om[1], om[2].upper() == "YES"
    if v.get("model"):
        _model(res, v["model"])
    fill_l4t(f, res, v.get("l4t_version"))
    if v.get("jetpack"):
        f.os.jetpack = v["jetpack"]
        f.provenance["os.jetpack"] = "jetson_release -v"
    if v.get("cuda_arch_bin"):
        f.provenance["accelerators.cuda_arch"] = "jetson_release -v"
    if v.get("module"):
        f.identity.module_name = v["module"]
    fill_jetson_identity(res)
    if v.get("cuda_arch_bin") and f.accelerators:
        f.accelerators[0].cuda_arch = "sm_" + v["cuda_arch_bin"].replace(".", "")
    _fill_platform(res)


_JTOP_PLATFORM = {
    "Machine": "arch",
    "System": "system",
    "Distribution": "distribution",
    "Release": "kernel",
    "Python": "python",
}


@parser("jtop --error-log")
def parse_jtop_error_log(text: str, res: ParseResult) -> None:
    """The 'PLATFORM' block and the 'JETSON RAW OUTPUT' Path:/content sections."""
    v = res.values
    for line in text.split("\n"):
        m = re.match(r"^\s*-?\s*(Machine|System|Distribution|Release|Python)\s*:\s*(.+)$", line)
        if m and _JTOP_PLATFORM[m[1]] not in v:
            v[_JTOP_PLATFORM[m[1]]] = m[2].strip()
    sections = re.split(r"^-{6,}\s*$", text, flags=re.M)
    for sec in sections:
        m = re.match(r"\s*Path:\s*(\S+)\s*\n(.*)", sec, re.S)
        if not m:
            continue
        path, body = m[1], m[2].strip("\n")
        if body.strip() in ("No such file or directory", "FAIL", ""):
            continue
        if path.endswith("nv_tegra_release"):
            sub = ParseResult(command=res.command)
            if _nv_release(body, sub):
                for k, val in sub.values.items():
                    if k in ("arch",) and k in v:
                        continue
                    v.setdefault(k, val)
        elif path.endswith("/model"):
            _model(res, body)
        elif path.endswith("/compatible"):
            fill_compatible(res, body.strip())
        elif path.endswith("boardids"):
            v["boardids"] = body.strip()
        elif path.endswith("dtsfilename"):
            v["dtsfilename"] = body.strip()
    fill_l4t(res.facts, res, v.get("l4t_version"))
    _fill_platform(res)
    if v.get("l4t_version") is None:
        res.warnings.append("no nv_tegra_release section: L4T unknown")
