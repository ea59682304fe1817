"""Which command produced a captured output: each known command scores the text, the best wins.

Used by ``edgelab facts parse`` for a paste a colleague sends, and by collectors as a check."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from edgelab.probe.facts import Facts, merge
from edgelab.probe.parsers import (
    android,
    cpufreq,
    cpuinfo,
    hostnamectl,
    jetson,
    kernel,
    lscpu,
    meminfo,
    nvidia_smi,
    os_release,
    thermal,
    windows,
)
from edgelab.probe.parsers.base import ParseResult, prepare


@dataclass(frozen=True)
class Command:
    name: str  # short id: "nv_tegra_release"
    command: str  # what an operator runs
    parse: Callable[[Any], ParseResult]
    score: Callable[[str], float]


def _count(pattern: str, text: str, flags: int = re.M) -> int:
    return len(re.findall(pattern, text, flags))


def _has(pattern: str, text: str, flags: int = re.M) -> bool:
    return re.search(pattern, text, flags) is not None


def _lscpu_score(t: str) -> float:
    from edgelab.probe import tables

    hits = 0
    keys = set()
    for line in t.split("\n")[:80]:
        m = re.match(r"^\s*([^:：]{1,60}?)\s*[:：]", line)
        if m and tables.lscpu_key(m[1])[0] in (
            "architecture",
            "cpus",
            "model_name",
            "vendor_id",
            "byte_order",
            "threads_per_core",
            "online_cpus",
            "cpu_family",
            "sockets",
        ):
            hits += 1
            keys.add(tables.lscpu_key(m[1])[0])
    if hits < 2 or not keys & {"architecture", "cpus", "byte_order", "online_cpus"}:
        return 0.0
    return min(0.85, 0.2 * hits)


def _wsl_score(t: str) -> float:
    lines = [ln.strip() for ln in t.strip().split("\n") if ln.strip()]
    if not 3 <= len(lines) <= 9:
        return 0.0
    shaped = sum(1 for ln in lines if re.match(r"^[^:：]{2,40}[:：]\s*\d+(\.\d+){2,}[\w.\-]*$", ln))
    first = re.match(r"^[^:：]{2,40}[:：]\s*\d+\.\d+\.\d+\.\d+$", lines[0])
    win = any(re.search(r"[:：]\s*10\.0\.\d{5}\.\d+$", ln) for ln in lines)
    return 0.9 if first and win and shaped >= len(lines) - 1 else 0.0


def _csv_score(t: str) -> float:
    head = t.lstrip().split("\n", 1)[0]
    fields = {h.strip() for h in head.split(",")}
    known = {
        "name",
        "driver_version",
        "pci.bus_id",
        "uuid",
        "temperature.gpu",
        "pstate",
        "compute_cap",
        "index",
        "memory.total [MiB]",
        "memory.used [MiB]",
        "count",
        "utilization.gpu [%]",
    }
    return 0.9 if len(fields & known) >= 2 and "\n" in t.strip() else 0.0


def _json_score(t: str) -> float:
    s = t.lstrip()
    if not s.startswith(("{", "[")):
        return 0.0
    return (
        0.8
        if _has(r'"(Name|Caption|Manufacturer|NumberOfCores|DriverVersion|FriendlyName|Win32_\w+)"', s)
        else 0.0
    )


def _table_score(t: str) -> float:
    lines = t.strip("\n").split("\n")
    for i in range(1, min(len(lines), 6)):
        if re.fullmatch(r"\s*-+( +-+)*\s*", lines[i]) and re.match(
            r"^\s*[A-Z]\w+( +[A-Z]\w+)*\s*$", lines[i - 1]
        ):
            return 0.7
    return 0.0


COMMANDS: list[Command] = [
    Command(
        "jtop_error_log",
        "jtop --error-log",
        jetson.parse_jtop_error_log,
        lambda t: 1.0 if _has(r"JETSON RAW OUTPUT|^Path: /etc/nv_tegra_release", t) else 0.0,
    ),
    Command(
        "jetson_release",
        "jetson_release -v",
        jetson.parse_jetson_release,
        lambda t: (
            1.0
            if _has(r"jetson-stats|^\s*- (P-Number|L4T|699-level Part Number):|Jetpack missing", t)
            else 0.0
        ),
    ),
    Command(
        "nv_tegra_release",
        "cat /etc/nv_tegra_release",
        jetson.parse_nv_tegra_release,
        lambda t: 0.95 if _has(r"^#\s*R\d+ \(\w+\), REVISION:", t) else 0.0,
    ),
    Command(
        "nvpmodel",
        "nvpmodel -q",
        jetson.parse_nvpmodel,
        lambda t: 0.95 if _has(r"^NV Power Mode:", t) and len(t.strip().split("\n")) <= 4 else 0.0,
    ),
    Command(
        "tegrastats",
        "tegrastats",
        jetson.parse_tegrastats,
        lambda t: 0.95 if _has(r"RAM \d+/\d+MB", t) and _has(r"CPU \[", t) else 0.0,
    ),
    Command(
        "dt_compatible",
        "cat /proc/device-tree/compatible",
        jetson.parse_dt_compatible,
        lambda t: (
            0.6
            if _has(
                r"^(nvidia|qcom|rockchip|brcm|amlogic|mediatek|allwinner|raspberrypi),[\w,+\-\x00]+$",
                t.strip(),
            )
            and "\n" not in t.strip()
            else 0.0
        ),
    ),
    Command(
        "dt_model",
        "cat /proc/device-tree/model",
        jetson.parse_dt_model,
        lambda t: (
            0.3
            if len(t.strip().split("\n")) == 1
            and _has(
                r"^(NVIDIA |Raspberry Pi|Qualcomm|Rockchip|"
                r"Radxa|Khadas|Orange Pi).{3,100}$",
                t.strip(),
            )
            else 0.0
        ),
    ),
    Command(
        "cpuinfo",
        "cat /proc/cpuinfo",
        cpuinfo.parse_cpuinfo,
        lambda t: (
            0.9 if _has(r"^processor\s*:\s*\d+", t) else (0.5 if _has(r"^Processor\s*:\s*\S", t) else 0.0)
        ),
    ),
    Command("lscpu", "lscpu", lscpu.parse_lscpu, _lscpu_score),
    Command(
        "meminfo",
        "cat /proc/meminfo",
        meminfo.parse_meminfo,
        lambda t: 0.95 if _has(r"^MemTotal:\s+\d+ kB", t) else 0.0,
    ),
    Command(
        "proc_version",
        "cat /proc/version",
        kernel.parse_proc_version,
        lambda t: 0.95 if _has(r"^Linux version \S+", t.strip()) else 0.0,
    ),
    Command(
        "uname",
        "uname -a",
        kernel.parse_uname,
        lambda t: 0.9 if _has(r"^Linux \S+ \d+\.\d+\S* #\d+", t.strip()) else 0.0,
    ),
    Command(
        "os_release",
        "cat /etc/os-release",
        os_release.parse_os_release,
        lambda t: 0.9 if _count(r"^(NAME|ID|VERSION_ID|PRETTY_NAME|ID_LIKE)=", t) >= 2 else 0.0,
    ),
    Command(
        "hostnamectl",
        "hostnamectl",
        hostnamectl.parse_hostnamectl,
        lambda t: (
            0.95
            if _has(r"^\s*(Static hostname|Icon name|Machine ID):", t)
            or (_has(r"^\s*Operating System:", t) and _has(r"^\s*Kernel:", t))
            else 0.0
        ),
    ),
    Command(
        "cpufreq",
        "grep . /sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq",
        cpufreq.parse_cpufreq,
        lambda t: (
            0.95 if _has(r"/sys/devices/system/cpu/(cpu\d+/cpufreq|cpufreq/policy\d+)/\w+:", t) else 0.0
        ),
    ),
    Command(
        "thermal",
        "grep . /sys/class/thermal/thermal_zone*/{type,temp}",
        thermal.parse_thermal,
        lambda t: 0.95 if _has(r"thermal_zone\d+/(type|temp):", t) else 0.0,
    ),
    Command(
        "getprop",
        "getprop",
        android.parse_getprop,
        lambda t: 0.95 if _count(r"^\[[\w.\-]+\]: \[", t) >= 2 else 0.0,
    ),
    Command(
        "build_prop",
        "cat build.prop",
        android.parse_build_prop,
        lambda t: 0.85 if _count(r"^ro\.[\w.]+=", t) >= 2 else 0.0,
    ),
    Command(
        "dumpsys_battery",
        "dumpsys battery",
        android.parse_dumpsys_battery,
        lambda t: 0.95 if _has(r"Current Battery Service state", t) else 0.0,
    ),
    Command(
        "nvidia_smi",
        "nvidia-smi",
        nvidia_smi.parse_nvidia_smi_table,
        lambda t: 0.95 if _has(r"NVIDIA-SMI \d", t) else 0.0,
    ),
    Command(
        "nvidia_smi_csv",
        "nvidia-smi --query-gpu=... --format=csv",
        nvidia_smi.parse_nvidia_smi_csv,
        _csv_score,
    ),
    Command(
        "nvidia_smi_xml",
        "nvidia-smi -q -x",
        nvidia_smi.parse_nvidia_smi_xml,
        lambda t: 0.97 if _has(r"<nvidia_smi_log>", t) else 0.0,
    ),
    Command(
        "systeminfo",
        "systeminfo",
        windows.parse_systeminfo,
        lambda t: (
            0.95 if _has(r"^OS Name:\s", t) and _has(r"^(System Type|OS Version|Processor\(s\)):", t) else 0.0
        ),
    ),
    Command(
        "msinfo32",
        "msinfo32 (System Summary)",
        windows.parse_msinfo32,
        lambda t: (
            0.9
            if _has(r"^OS Name\t", t) or _count(r"^(System Model|System Type|Processor)\t", t) >= 2
            else 0.0
        ),
    ),
    Command(
        "dxdiag",
        "dxdiag /t",
        windows.parse_dxdiag,
        lambda t: (
            0.97
            if _has(r"^\s*(Card name|DirectX Version|DxDiag Version):", t)
            and _has(r"^\s*Operating System:", t)
            else 0.0
        ),
    ),
    Command("cim_json", "Get-CimInstance ... | ConvertTo-Json", windows.parse_cim_json, _json_score),
    Command("wmi_table", "Get-WmiObject ... | Format-Table", windows.parse_wmi_table, _table_score),
    Command(
        "wmi_list",
        "Get-WmiObject ... | Format-List",
        windows.parse_wmi_list,
        lambda t: (
            0.6
            if _count(r"^[A-Z][A-Za-z]+\s+: ", t) >= 3
            and _has(r"^(Caption|Name|IdentifyingNumber|Manufacturer|Vendor|DeviceID)\s+: ", t)
            else 0.0
        ),
    ),
    Command(
        "cpufetch_debug",
        "cpufetch --debug",
        windows.parse_cpufetch_debug,
        lambda t: 0.9 if _has(r"^cpufetch v[\d.]+", t) else 0.0,
    ),
    Command("wsl_version", "wsl --version", windows.parse_wsl_version, _wsl_score),
]

BY_NAME = {c.name: c for c in COMMANDS}


def detect(text: Any) -> Command | None:
    """The command that most likely produced ``text``; None when nothing fits (never raises)."""
    try:
        clean = prepare(text)
    except Exception:  # noqa: BLE001
        return None
    if not clean.strip():
        return None
    best: tuple[float, Command] | None = None
    for cmd in COMMANDS:
        try:
            s = cmd.score(clean)
        except Exception:  # noqa: BLE001 - a scorer bug must not hide the other commands
            s = 0.0
        if s > 0 and (best is None or s > best[0]):
            best = (s, cmd)
    return best[1] if best else None


def parse_any(text: Any, command: str | None = None) -> ParseResult | None:
    """Parse with the named command (``BY_NAME`` key) or the detected one; None when unknown."""
    cmd = BY_NAME.get(command) if command else detect(text)
    return cmd.parse(text) if cmd else None


def recognized() -> list[str]:
    return [c.command for c in COMMANDS]


def facts_from_outputs(outputs: dict[str, Any]) -> tuple[Facts, list[ParseResult]]:
    """Raw outputs of one probe (command id from ``BY_NAME`` -> text; an unknown key means: detect)
    -> merged typed facts plus each parser's result. Used by collectors and to re-parse stored raws."""
    results: list[ParseResult] = []
    for key, text in outputs.items():
        res = parse_any(text, key if key in BY_NAME else None)
        if res is None:
            res = ParseResult(command=str(key), warnings=["output not recognized"])
        results.append(res)
    facts = merge([(r.command, r.facts) for r in results])
    for r in results:  # parser warnings travel with the facts (e.g. "JetPack: unknown for L4T ...")
        new = [f"{r.command}: {w}" for w in r.warnings]
        facts.warnings.extend(w for w in new if w not in facts.warnings)
    if facts.os.is_wsl:
        # Inside WSL, /proc/meminfo shows the VM quota, not the Windows host's RAM (DESIGN §2).
        for pool in facts.memory.pools:
            if pool.kind == "ram":
                pool.kind = "wsl_quota"
    return facts, results
