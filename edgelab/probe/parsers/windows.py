"""Windows: systeminfo, msinfo32 summary, dxdiag text, Get-WmiObject/Get-CimInstance as list,
format-table or ConvertTo-Json (Win32_Processor, Win32_ComputerSystem, Win32_OperatingSystem,
Win32_VideoController, Win32_ComputerSystemProduct, PnP ComputeAccelerator), cpufetch --debug, and
``wsl --version`` in any UI language (matched by version-number shape and line order, not labels)."""

from __future__ import annotations

import json
import re
from typing import Any

from edgelab.probe import tables
from edgelab.probe.facts import Accelerator, Facts, MemoryPool
from edgelab.probe.parsers.base import ParseResult, norm_arch, parser, snake, to_float, to_int
from edgelab.units import MIB


def _arch_from_system_type(st: str | None) -> str | None:
    if not st:
        return None
    s = st.lower()
    if "arm64" in s:
        return "arm64"
    if "x64" in s:
        return "x86_64"
    if "x86" in s:
        return "x86"
    return None


def _os_fill(f: Facts, name: str | None, version: str | None) -> None:
    f.os.family = "windows"
    if name:
        f.os.distro = name
    if version:
        f.os.windows_version = version
        if m := re.search(r"Build (\d+)|^10\.0\.(\d+)", version):
            f.os.windows_build = m[1] or m[2]


def _cpu_vendor(name: str) -> str | None:
    n = name.lower()
    for needle, vendor in (
        ("amd", "AMD"),
        ("intel", "Intel"),
        ("qualcomm", "Qualcomm"),
        ("snapdragon", "Qualcomm"),
        ("nvidia", "NVIDIA"),
        ("ampere", "Ampere"),
    ):
        if needle in n:
            return vendor
    return None


def _qualcomm_soc(f: Facts, text: str) -> None:
    part = tables.find_qualcomm_part(text)
    if part:
        row = tables.qualcomm_part(part)
        f.identity.soc_vendor, f.identity.soc_part = "Qualcomm", part
        f.identity.soc_name = row["name"] if row else None
        if row and row.get("hexagon"):
            f.accelerators.append(
                Accelerator(
                    kind="npu",
                    vendor="Qualcomm",
                    name=f"Hexagon {row['hexagon']}",
                    apis=[f"QNN HTP {row['hexagon']}"],
                )
            )


def _mem_mb(s: str | None) -> int | None:
    """'16,234 MB' / '15.9 GB' / '32768MB RAM' -> MiB."""
    if not s:
        return None
    m = re.search(r"([\d.,]+)\s*(MB|GB|KB)", s, re.I)
    if not m:
        return None
    num = (
        to_float(m[1].replace(",", ""))
        if "," in m[1] and "." not in m[1]
        else to_float(m[1].replace(",", ""))
    )
    if num is None:
        return None
    unit = m[2].upper()
    return int(num * 1024) if unit == "GB" else int(num / 1024) if unit == "KB" else int(num)


# ---------------------------------------------------------------- systeminfo


def _first_line_of(value: object) -> str | None:
    """A field's value as one string: its first line when the capture gave it several."""
    if isinstance(value, list):
        value = next((x for x in value if isinstance(x, str) and x), None)
    return value if isinstance(value, str) else None


@parser("systeminfo")
def parse_systeminfo(text: str, res: ParseResult) -> None:
    v, f = res.values, res.facts
    fields: dict[str, list[str]] = {}
    last: str | None = None
    for line in text.split("\n"):
        m = re.match(r"^([A-Za-z][A-Za-z0-9 ().:/-]*?):\s{2,}(.*)$", line) or re.match(
            r"^([A-Z][\w ()/-]*?):\s+(.*)$", line
        )
        if m and not line.startswith(" "):
            last = m[1].strip()
            fields.setdefault(last, []).append(m[2].strip())
        elif last and line.startswith(" ") and line.strip():
            fields[last].append(line.strip())
    if not fields:
        return
    skip = {"Registered Owner", "Registered Organization", "Product ID"}
    for label, vals in fields.items():
        if label in skip:
            continue
        key = snake(label)
        if label == "Processor(s)":
            m = re.match(r"(\d+)", vals[0])
            v["processor_count"] = int(m[1]) if m else None
            procs = [re.sub(r"^\[\d+\]:\s*", "", x) for x in vals[1:]]
            if procs:
                v["processor"] = procs[0]
                v["processors"] = procs
        elif label == "Hotfix(s)" or label == "Network Card(s)":
            v[key] = [re.sub(r"^\[\d+\]:\s*", "", x) for x in vals[1:]]
        else:
            v[key] = vals[0] if len(vals) == 1 else vals
    one = _first_line_of  # a label repeated or continued in a damaged capture holds a list
    if one(v.get("system_type")):
        v["arch"] = _arch_from_system_type(one(v["system_type"]))
    _os_fill(f, one(v.get("os_name")), one(v.get("os_version")))
    f.os.arch = norm_arch(v.get("arch"))
    f.cpu.arch = f.os.arch
    f.identity.vendor = one(v.get("system_manufacturer"))
    f.identity.model = one(v.get("system_model"))
    f.identity.hostname = one(v.get("host_name"))
    if one(v.get("processor")):
        f.cpu.model = one(v["processor"])
        f.cpu.vendor = _cpu_vendor(f.cpu.model)
        _qualcomm_soc(f, f.cpu.model)
    total = _mem_mb(
        v.get("total_physical_memory") if isinstance(v.get("total_physical_memory"), str) else None
    )
    if total:
        v["memory_mb"] = total
        f.memory.pools.append(MemoryPool(kind="ram", total_bytes=total * MIB))
    avail = _mem_mb(
        v.get("available_physical_memory") if isinstance(v.get("available_physical_memory"), str) else None
    )
    if avail:
        f.memory.pools.append(MemoryPool(kind="available", total_bytes=avail * MIB))
    vmax = v.get("virtual_memory_max_size")
    if isinstance(vmax, str) and total and _mem_mb(vmax):
        f.memory.pools.append(MemoryPool(kind="commit", total_bytes=_mem_mb(vmax) * MIB))


# ---------------------------------------------------------------- msinfo32

_MSINFO_RENAME = {
    "Version": "os_version",
    "Installed Physical Memory (RAM)": "installed_ram",
    "BIOS Version/Date": "bios_version",
    "BIOS Mode": "bios_mode",
}


@parser("msinfo32 (System Summary)")
def parse_msinfo32(text: str, res: ParseResult) -> None:
    v, f = res.values, res.facts
    for line in text.split("\n"):
        if "\t" not in line:
            continue
        label, _, val = line.partition("\t")
        label, val = label.strip(), val.strip()
        if not label or label in ("User Name",):
            continue
        v.setdefault(_MSINFO_RENAME.get(label) or snake(label), val)
    if not v:
        return
    proc = v.get("processor")
    if isinstance(proc, str):
        parts = [p.strip() for p in proc.split(",")]
        v["processor"] = parts[0]
        for p in parts[1:]:
            if m := re.match(r"([\d.]+)\s*Mhz", p, re.I):
                v["cpu_mhz"] = to_int(m[1]) if to_int(m[1]) is not None else to_float(m[1])
            elif m := re.match(r"(\d+)\s*Core\(s\)", p):
                v["cores"] = int(m[1])
            elif m := re.match(r"(\d+)\s*Logical Processor\(s\)", p):
                v["logical_processors"] = int(m[1])
        f.cpu.model = parts[0]
        f.cpu.vendor = _cpu_vendor(parts[0])
        f.cpu.physical_cores = v.get("cores")
        f.cpu.logical_cores = v.get("logical_processors")
        _qualcomm_soc(f, parts[0])
    if v.get("system_type"):
        v["arch"] = _arch_from_system_type(v["system_type"])
        f.os.arch = norm_arch(v["arch"])
        f.cpu.arch = f.os.arch
    _os_fill(f, v.get("os_name"), v.get("os_version"))
    f.identity.vendor = v.get("system_manufacturer")
    f.identity.model = v.get("system_model")
    f.identity.hostname = v.get("system_name")
    for key, kind in (
        ("total_physical_memory", "ram"),
        ("available_physical_memory", "available"),
        ("page_file_space", "pagefile"),
        ("total_virtual_memory", "commit"),
    ):
        mb = _mem_mb(v.get(key))
        if mb:
            f.memory.pools.append(MemoryPool(kind=kind, total_bytes=mb * MIB))


# ---------------------------------------------------------------- dxdiag


@parser("dxdiag /t")
def parse_dxdiag(text: str, res: ParseResult) -> None:
    v, f = res.values, res.facts
    cards: list[dict[str, str]] = []
    for line in text.split("\n"):
        m = re.match(r"^\s*([A-Za-z][\w ./()-]*?):\s(.*)$", line)
        if not m:
            continue
        label, val = m[1].strip(), m[2].strip()
        if label == "Card name":
            cards.append({"name": val})
            continue
        if cards and label in (
            "Manufacturer",
            "Chip type",
            "Driver Version",
            "Dedicated Memory",
            "Shared Memory",
            "Display Memory",
            "Driver Date/Size",
            "Device Type",
        ):
            cards[-1].setdefault(snake(label), val)
            continue
        v.setdefault(snake(label), val)
    if not v and not cards:
        return
    os_line = v.pop("operating_system", None)
    if os_line:
        v["os"] = re.sub(r"\s*\(\d{5}\.[^)]*\)\s*$", "", os_line)
    proc = v.get("processor")
    if proc:
        if m := re.search(r"\((\d+) CPUs\)", proc):
            v["cpu_count"] = int(m[1])
        if m := re.search(r"~([\d.]+)GHz", proc):
            v["cpu_ghz"] = to_float(m[1])
        v["processor"] = re.sub(r"\s*\(\d+ CPUs\).*$", "", proc).strip()
        f.cpu.model = v["processor"]
        f.cpu.vendor = _cpu_vendor(v["processor"])
        f.cpu.logical_cores = v.get("cpu_count")
        _qualcomm_soc(f, v["processor"])
    if mb := _mem_mb(v.get("memory")):
        v["memory_mb"] = mb
        f.memory.pools.append(MemoryPool(kind="ram", total_bytes=mb * MIB))
    is_arm = bool(re.search(r"arm64|Snapdragon|Qualcomm|ARMv8", text, re.I))
    if "64-bit" in v.get("os", "") or is_arm:
        v["arch"] = "arm64" if is_arm else "x86_64"
    f.os.arch = norm_arch(v.get("arch"))
    f.cpu.arch = f.os.arch
    _os_fill(f, v.get("os"), None)
    if m := re.search(r"Build (\d+)", v.get("os", "")):
        f.os.windows_build = m[1]
    f.identity.vendor = v.get("system_manufacturer")
    f.identity.model = v.get("system_model")
    f.identity.hostname = v.get("machine_name")
    if cards:
        v["gpu_name"] = cards[0]["name"]
        if cards[0].get("driver_version"):
            v["gpu_driver_version"] = cards[0]["driver_version"]
        v["gpus"] = cards
    for c in cards:
        f.accelerators.append(
            Accelerator(
                kind="gpu",
                vendor=_cpu_vendor(c["name"]) or c.get("manufacturer"),
                name=c["name"],
                driver_version=c.get("driver_version"),
                apis=["DirectX 12", "DirectML"] if "12" in v.get("direct_x_version", "") else [],
            )
        )


# ---------------------------------------------------------------- WMI / CIM

_ARCH_CODE = {0: "x86", 5: "arm", 9: "x86_64", 12: "aarch64"}


def _wmi_class(keys: set[str]) -> str:
    k = {x.lower() for x in keys}
    if {"videoprocessor", "adapterram"} & k or ("driverversion" in k and "adaptercompatibility" in k):
        return "Win32_VideoController"
    if "numberofcores" in k or "maxclockspeed" in k:
        return "Win32_Processor"
    if "identifyingnumber" in k:
        return "Win32_ComputerSystemProduct"
    if "totalvisiblememorysize" in k or "buildnumber" in k:
        return "Win32_OperatingSystem"
    if "totalphysicalmemory" in k or ("manufacturer" in k and "model" in k and "systemtype" in k):
        return "Win32_ComputerSystem"
    if "friendlyname" in k and ("instanceid" in k or "class" in k):
        return "PnpDevice"
    if "driverversion" in k:
        return "Win32_VideoController"
    return "unknown"


_ROWS_KEY = {"Win32_VideoController": "adapters", "Win32_Processor": "processors", "PnpDevice": "devices"}


def _masked(val: str) -> bool:
    return bool(re.search(r"x{3,}|\*{3,}|REDACTED|0{8,}", val, re.I))


def fill_wmi(res: ParseResult, cls: str, rows: list[dict[str, Any]]) -> None:
    """Flat values and typed facts from WMI/CIM objects of one class (property names as Windows spells them)."""
    v, f = res.values, res.facts
    rows = [
        {k: val for k, val in r.items() if not str(k).startswith("Cim")} for r in rows if isinstance(r, dict)
    ]
    if not rows:
        return
    v.setdefault("wmi_class", cls)
    flat_rows = [{snake(str(k)): val for k, val in r.items()} for r in rows]
    if cls in _ROWS_KEY:
        v[_ROWS_KEY[cls]] = flat_rows
    first = flat_rows[0]
    if cls not in _ROWS_KEY or len(rows) == 1:
        for k, val in first.items():
            v.setdefault(k, val)
    if "identifying_number" in first:
        v["identifying_number_masked"] = _masked(str(first["identifying_number"]))

    def g(r: dict[str, Any], *names: str) -> Any:
        lower = {str(k).lower(): val for k, val in r.items()}
        for n in names:
            if lower.get(n.lower()) not in (None, ""):
                return lower[n.lower()]
        return None

    if cls == "Win32_Processor":
        r = rows[0]
        f.cpu.model = g(r, "Name")
        f.cpu.vendor = _cpu_vendor(str(g(r, "Name", "Manufacturer") or ""))
        cores = [to_int(str(g(x, "NumberOfCores"))) for x in rows]
        logical = [to_int(str(g(x, "NumberOfLogicalProcessors"))) for x in rows]
        if all(c is not None for c in cores):
            f.cpu.physical_cores = sum(cores)  # type: ignore[arg-type]
        if all(c is not None for c in logical):
            f.cpu.logical_cores = sum(logical)  # type: ignore[arg-type]
        f.cpu.sockets = len(rows)
        code = to_int(str(g(r, "Architecture")))
        if code in _ARCH_CODE:
            f.cpu.arch = _ARCH_CODE[code]
        if f.cpu.model:
            _qualcomm_soc(f, f.cpu.model)
    elif cls == "Win32_ComputerSystem":
        r = rows[0]
        f.identity.vendor = g(r, "Manufacturer")
        f.identity.model = g(r, "Model")
        f.identity.hostname = g(r, "Name", "DNSHostName")
        total = to_int(str(g(r, "TotalPhysicalMemory")))
        if total:
            f.memory.pools.append(MemoryPool(kind="ram", total_bytes=total))
        f.cpu.arch = norm_arch(_arch_from_system_type(g(r, "SystemType")))
    elif cls == "Win32_ComputerSystemProduct":
        r = rows[0]
        f.identity.vendor = g(r, "Vendor")
        f.identity.model = g(r, "Name")
    elif cls == "Win32_OperatingSystem":
        r = rows[0]
        _os_fill(f, g(r, "Caption"), g(r, "Version"))
        f.os.windows_build = str(g(r, "BuildNumber")) if g(r, "BuildNumber") else f.os.windows_build
        osarch = str(g(r, "OSArchitecture") or "").lower()
        f.os.arch = "aarch64" if "arm" in osarch else "x86_64" if "64" in osarch else None
        kib = 1024
        for prop, kind in (
            ("TotalVisibleMemorySize", "ram"),
            ("FreePhysicalMemory", "available"),
            ("SizeStoredInPagingFiles", "pagefile"),
            ("TotalVirtualMemorySize", "commit"),
        ):
            n = to_int(str(g(r, prop)))
            if n:
                f.memory.pools.append(MemoryPool(kind=kind, total_bytes=n * kib))
    elif cls == "Win32_VideoController":
        for r in rows:
            name = g(r, "Name", "Caption")
            ram = to_int(str(g(r, "AdapterRAM")))
            acc = Accelerator(
                kind="gpu",
                vendor=_cpu_vendor(str(name or "")) or g(r, "AdapterCompatibility"),
                name=name,
                driver_version=g(r, "DriverVersion"),
                apis=["DirectX 12", "DirectML"],
            )
            if ram is not None and ram > 0:
                acc.memory_bytes = ram
                if ram >= 4 * 1024**3 - 1024**2:
                    res.warnings.append(
                        f"{name}: AdapterRAM is a 32-bit field and saturates at 4 GiB; "
                        "read VRAM from the registry or the vendor tool"
                    )
            status = g(r, "Status")
            if status is not None:
                acc.usable = str(status) == "OK"
                acc.reason = f"Windows device status {status}"
            f.accelerators.append(acc)
    elif cls == "PnpDevice":
        for r in rows:
            pclass = str(g(r, "Class", "PNPClass") or "")
            name = g(r, "FriendlyName", "Name")
            if pclass and pclass.lower() != "computeaccelerator":
                continue
            status = str(g(r, "Status") or "")
            f.accelerators.append(
                Accelerator(
                    kind="npu",
                    vendor=_cpu_vendor(str(name or "")) or g(r, "Manufacturer"),
                    name=name,
                    apis=_npu_apis(str(name or "")),
                    usable=(status == "OK") if status else None,
                    reason=f"PnP status {status}" if status else "PnP status not reported",
                )
            )
    f.os.family = "windows"


def _npu_apis(name: str) -> list[str]:
    n = name.lower()
    if "hexagon" in n or "qualcomm" in n:
        return ["QNN", "DirectML"]
    if "amd" in n or "ipu" in n or "ryzen ai" in n:
        return ["XDNA", "DirectML"]
    if "intel" in n or "ai boost" in n:
        return ["OpenVINO", "DirectML"]
    return ["DirectML"]


@parser("Get-CimInstance ... | ConvertTo-Json")
def parse_cim_json(text: str, res: ParseResult) -> None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        res.warnings.append(f"not valid JSON: {exc}"[:120])
        return
    sections: list[tuple[str | None, Any]] = []
    if (
        isinstance(data, dict)
        and data
        and all(isinstance(k, str) and re.match(r"^(Win32_|Pnp|PnP|ComputeAccelerator)", k) for k in data)
    ):
        sections = list(data.items())  # a batched collector: {"Win32_Processor": [...], ...}
    else:
        sections = [(None, data)]
    for name, payload in sections:
        rows = payload if isinstance(payload, list) else [payload]
        rows = [r for r in rows if isinstance(r, dict)]
        if not rows:
            continue
        cls = name
        if cls is None:
            cim = rows[0].get("CimClass")  # WinPS 5.1: an object; PS 7: "root/cimv2:Win32_Processor"
            if isinstance(cim, dict):
                cim = cim.get("CimClassName")
            elif isinstance(cim, str):
                cim = cim.rsplit(":", 1)[-1] or None
            cls = (cim if isinstance(cim, str) else None) or _wmi_class(set(rows[0]))
        if cls and cls.lower().startswith(("pnp", "computeaccelerator")):
            cls = "PnpDevice"
        fill_wmi(res, cls, rows)
    if not res.values:
        res.warnings.append("JSON holds no WMI/CIM objects")


@parser("Get-WmiObject ... | Format-List")
def parse_wmi_list(text: str, res: ParseResult) -> None:
    objs: list[dict[str, str]] = [{}]
    last = None
    for line in text.split("\n"):
        if not line.strip():
            if objs[-1]:
                objs.append({})
            continue
        m = re.match(r"^([A-Za-z_][\w]*)\s*:\s?(.*)$", line)
        if m:
            last = m[1]
            objs[-1].setdefault(last, m[2].strip())
        elif last and line.startswith(" ") and objs[-1]:
            objs[-1][last] += " " + line.strip()
    objs = [o for o in objs if o]
    if not objs:
        return
    fill_wmi(res, _wmi_class(set(objs[0])), objs)


@parser("Get-WmiObject ... | Format-Table")
def parse_wmi_table(text: str, res: ParseResult) -> None:
    lines = [ln.rstrip() for ln in text.split("\n")]
    idx = next(
        (
            i
            for i in range(1, len(lines))
            if re.fullmatch(r"[-\s]*-+[-\s]*", lines[i] or "") and lines[i - 1].strip()
        ),
        None,
    )
    if idx is None:
        res.warnings.append("no header/dashes lines")
        return
    header, dashes = lines[idx - 1], lines[idx]
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", dashes)]
    names = [
        header[a : b + 40].split()[0] if header[a : b + 40].split() else f"col{i}"
        for i, (a, b) in enumerate(spans)
    ]
    rows = []
    for line in lines[idx + 1 :]:
        if not line.strip():
            continue
        row = {}
        for i, (a, _b) in enumerate(spans):
            end = spans[i + 1][0] if i + 1 < len(spans) else len(line)
            row[names[i]] = line[a:end].strip()
        rows.append(row)
    if not rows:
        res.warnings.append("table has no rows")
        return
    fill_wmi(res, _wmi_class(set(names)), rows)


# ---------------------------------------------------------------- cpufetch


@parser("cpufetch --debug")
def parse_cpufetch_debug(text: str, res: ParseResult) -> None:
    v, f = res.values, res.facts
    lines = [ln.rstrip() for ln in text.split("\n")]
    for i, ln in enumerate(lines):
        m = re.match(r"^cpufetch v([\d.]+)\s*\((.+?) build\)", ln)
        if m:
            v["cpufetch_version"], v["build"] = m[1], m[2]
            if i + 1 < len(lines) and lines[i + 1].strip() and not lines[i + 1].startswith(("-", "[")):
                v["cpu_name"] = lines[i + 1].strip()
        elif m := re.match(r"^-\s*([^:]+):\s*(.*)$", ln):
            label, val = m[1].strip(), m[2].strip()
            key = "cpuid_signature" if label == "CPUID dump" else snake(label)
            v.setdefault(key, val)
        elif m := re.match(r"^\[ERROR\]:\s*(.*)$", ln):
            res.warnings.append(f"cpufetch: {m[1]}")
    if v.get("cpu_name"):
        f.cpu.model = v["cpu_name"]
        f.cpu.vendor = _cpu_vendor(v["cpu_name"])
    if "Windows" in v.get("build", ""):
        f.os.family = "windows"


# ---------------------------------------------------------------- wsl --version

_V4 = re.compile(r"^\d+\.\d+\.\d+\.\d+$")
_WSL_LOCALE = [
    ("es", r"versi[oó]n"),
    ("fr", r"version d[eu]"),
    ("de", r"-version|version:"),
    ("pt", r"vers[aã]o"),
    ("ja", r"バージョン"),
    ("zh", r"版本"),
    ("ko", r"버전"),
    ("ru", r"верси"),
    ("it", r"versione"),
    ("en", r"version"),
]


@parser("wsl --version")
def parse_wsl_version(text: str, res: ParseResult) -> None:
    """Order is fixed (WSL, kernel, WSLg, MSRDC, Direct3D, DXCore, Windows); labels are translated,
    so each value is placed by its shape, falling back on the line order."""
    v, f = res.values, res.facts
    pairs = []
    for line in text.split("\n"):
        m = re.match(r"^(.*?)[:：]\s*(\d[\w.\-+]*)\s*$", line.strip())
        if m:
            pairs.append((m[1], m[2]))
    if not pairs:
        return
    values = [val for _, val in pairs]
    v["wsl_version"] = values[0]
    plain3 = []
    for val in values[1:]:
        if re.fullmatch(r"10\.0\.\d+\.\d+", val) and "windows_version" not in v:
            v["windows_version"] = val
        elif re.fullmatch(r"10\.0\.\d+\.\d+-.+", val) and "dxcore_version" not in v:
            v["dxcore_version"] = val
        elif re.fullmatch(r"\d+\.\d+\.\d+-\d+", val) and "direct3d_version" not in v:
            v["direct3d_version"] = val
        elif re.fullmatch(r"\d+\.\d+\.\d+\.\d+(-\d+)?", val) and "kernel_version" not in v:
            v["kernel_version"] = val
        elif re.fullmatch(r"\d+\.\d+\.\d+", val):
            plain3.append(val)
        else:
            res.warnings.append(f"unplaced version {val!r}")
    if plain3:
        v["wslg_version"] = plain3[0]
    if len(plain3) > 1:
        v["msrdc_version"] = plain3[1]
    if not _V4.match(values[0]):
        res.warnings.append(f"first value {values[0]!r} does not look like a WSL version")
    labels = " ".join(lbl for lbl, _ in pairs).lower()
    for loc, pat in _WSL_LOCALE:
        if re.search(pat, labels):
            v["locale"] = loc
            break
    f.os.wsl_version = v["wsl_version"]  # the host runs WSL; its guests are WSL2 (Store WSL)
    f.os.family = "windows"
    if v.get("windows_version"):
        f.os.windows_version = v["windows_version"]
        f.os.windows_build = v["windows_version"].split(".")[2]
