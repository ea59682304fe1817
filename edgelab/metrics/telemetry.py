"""Telemetry: device output -> ResourceSample events.

Parsers are pure (text -> event); samplers run a command over a Transport stream and
turn each line or block into an event stamped on the lab clock at arrival. tegrastats,
thermal zones and dumpsys battery reuse the probe parsers so one reading of each format
exists in the code base. Every figure a source does not give stays None.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from edgelab.metrics.events import ResourceSample
from edgelab.probe.parsers.android import parse_dumpsys_battery
from edgelab.probe.parsers.tegrastats import parse_line
from edgelab.probe.parsers.thermal import parse_thermal
from edgelab.transport.base import Transport

Clock = Callable[[], float]


def from_tegrastats(line: str, *, t: float, device: str | None = None) -> ResourceSample | None:
    """One tegrastats line (:mod:`edgelab.probe.parsers.tegrastats` grammar): CPU load (mean of online
    cores), RAM available, temps, rail power (current), GR3D as GPU util; every other field in raw."""
    v = parse_line(line)
    if v is None or "ram_total_mb" not in v:
        return None
    mib = 1024 * 1024
    cores = [c for c in v.get("cpus", []) if c.get("online")]
    loads = [c["load_pct"] for c in cores if c.get("load_pct") is not None]
    freqs = [c["mhz"] for c in cores if c.get("mhz") is not None]
    clocks: dict[str, float] = {}
    if freqs and len(set(freqs)) == 1:
        clocks["cpu"] = float(freqs[0])
    elif freqs:
        clocks["cpu_max"] = float(max(freqs))
    engines = v.get("engines", {})
    gr3d = engines.get("GR3D_FREQ") or {}
    if gr3d.get("mhz") and max(gr3d["mhz"]) > 0:
        clocks["gpu"] = float(max(gr3d["mhz"]))
    emc = engines.get("EMC_FREQ") or {}
    if emc.get("mhz") and max(emc["mhz"]) > 0:
        clocks["emc"] = float(max(emc["mhz"]))
    raw = {k: val for k, val in v.items() if k not in ("temps_c", "rails_mw")}
    return ResourceSample(
        t=t,
        device=device,
        source="tegrastats",
        cpu_pct=sum(loads) / len(loads) if loads else None,
        mem_available_bytes=int((v["ram_total_mb"] - v["ram_used_mb"]) * mib),
        temps_c=dict(v["temps_c"]),
        clocks_mhz=clocks,
        power_w={k: mw / 1000.0 for k, mw in v["rails_mw"].items() if k != "NC"},
        gpu_util_pct=gr3d.get("load_pct"),
        raw=raw,
    )


def from_thermal(text: str, *, t: float, device: str | None = None) -> ResourceSample:
    """Android/Linux thermal zones (``grep . /sys/class/thermal/thermal_zone*/{type,temp}``)."""
    res = parse_thermal(text)
    return ResourceSample(t=t, device=device, source="thermal", temps_c=dict(res.facts.power.temperatures_c))


def from_dumpsys_battery(text: str, *, t: float, device: str | None = None) -> ResourceSample:
    """Battery temperature (and, where the vendor prints it, power = voltage x current now)."""
    res = parse_dumpsys_battery(text)
    b = res.facts.power.battery
    temps = {"battery": b.temperature_c} if b is not None and b.temperature_c is not None else {}
    power: dict[str, float] = {}
    cur = res.values.get("current_now")
    if b is not None and b.voltage_mv and isinstance(cur, int) and cur != 0:
        # current now is in mA on most vendors' dumpsys (uA in sysfs); sign = direction
        power["battery"] = abs(b.voltage_mv / 1000.0 * cur / 1000.0)
    return ResourceSample(t=t, device=device, source="dumpsys-battery", temps_c=temps, power_w=power)


NVSMI_FIELDS = (
    "index",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
    "clocks.sm",
    "clocks.mem",
    "memory.used",
    "memory.total",
)
# what a sampler asks for (nvidia-smi --help-query-gpu); an older driver refusing a field falls back
NVSMI_FULL = (
    "index",
    "name",
    "uuid",
    "pstate",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "temperature.memory",
    "power.draw",
    "power.limit",
    "clocks.sm",
    "clocks.mem",
    "clocks.gr",
    "memory.used",
    "memory.total",
    "memory.free",
    "fan.speed",
    "clocks_throttle_reasons.active",
)
NVSMI_MIN = (
    "index",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
    "clocks.sm",
    "memory.used",
    "memory.total",
)
NVSMI_ARGV = ["nvidia-smi", f"--query-gpu={','.join(NVSMI_FIELDS)}", "--format=csv,noheader,nounits"]
# clocks_throttle_reasons bits that mean the GPU was slowed (not idle 0x1 or app clocks 0x2):
# SW power cap 0x4, HW slowdown 0x8, SW thermal 0x20, HW thermal 0x40, HW power brake 0x80
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def _num(s: str) -> float | None:
    s = s.strip().split(" ")[0] if s.strip() else ""
    try:
        return float(s)
    except ValueError:  # [N/A], [Not Supported]
        return None


def _throttled(raw: str | None) -> bool | None:
    if raw is None or not raw.strip().lower().startswith("0x"):
        return None
    try:
        return bool(int(raw.strip(), 16) & THROTTLE_MASK)
    except ValueError:
        return None


def from_nvidia_smi_csv(
    text: str, *, t: float, device: str | None = None, fields: tuple[str, ...] = NVSMI_FIELDS
) -> list[ResourceSample]:
    """``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits``: one sample per GPU.

    Utilization, temperature, power and clocks go to the sample's fields; every queried field,
    known or not, is also kept in ``raw`` as nvidia-smi printed it ([N/A] stays [N/A])."""
    out = []
    for row in csv.reader(io.StringIO(text.strip()), skipinitialspace=True):
        if len(row) != len(fields):
            continue
        rec = {k: v.strip() for k, v in zip(fields, row, strict=True)}
        i = rec.get("index", "0")
        temp, power = _num(rec.get("temperature.gpu", "")), _num(rec.get("power.draw", ""))
        clocks = {
            k: v
            for k, v in (
                ("sm", _num(rec.get("clocks.sm", ""))),
                ("mem", _num(rec.get("clocks.mem", ""))),
                ("gr", _num(rec.get("clocks.gr", ""))),
            )
            if v is not None
        }
        temps = {f"gpu{i}": temp} if temp is not None else {}
        if (tm := _num(rec.get("temperature.memory", ""))) is not None:
            temps[f"gpu{i}_mem"] = tm
        reasons = rec.get("clocks_throttle_reasons.active") or rec.get("clocks_event_reasons.active")
        out.append(
            ResourceSample(
                t=t,
                device=device,
                source=f"nvidia-smi:gpu{i}",
                gpu_util_pct=_num(rec.get("utilization.gpu", "")),
                temps_c=temps,
                power_w={f"gpu{i}": power} if power is not None else {},
                clocks_mhz={f"gpu{i}_{k}": v for k, v in clocks.items()},
                throttled=_throttled(reasons),
                raw=rec,
            )
        )
    return out


@dataclass
class ProcCounters:
    """The /proc figures of one instant: total and idle jiffies, MemAvailable, a process's RSS."""

    total: int
    idle: int
    mem_available_bytes: int | None
    rss_bytes: int | None


def parse_proc_block(text: str) -> ProcCounters | None:
    """``head -1 /proc/stat``, ``grep MemAvailable /proc/meminfo`` and optionally ``grep VmRSS /proc/PID/status``."""
    total = idle = None
    avail = rss = None
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "cpu":
            nums = [int(x) for x in parts[1:] if x.isdigit()]
            total, idle = sum(nums[:8]), nums[3] + (nums[4] if len(nums) > 4 else 0)
        elif parts[0] == "MemAvailable:" and len(parts) >= 2:
            avail = int(parts[1]) * 1024
        elif parts[0] == "VmRSS:" and len(parts) >= 2:
            rss = int(parts[1]) * 1024
    if total is None:
        return None
    return ProcCounters(total, idle, avail, rss)


def proc_sample(
    prev: ProcCounters | None, now: ProcCounters, *, t: float, device: str | None = None
) -> ResourceSample:
    """CPU % needs two readings: busy share of the jiffies between them (None for the first)."""
    cpu = None
    if prev is not None and now.total > prev.total:
        cpu = 100.0 * (1.0 - (now.idle - prev.idle) / (now.total - prev.total))
    return ResourceSample(
        t=t,
        device=device,
        source="proc",
        cpu_pct=cpu,
        mem_available_bytes=now.mem_available_bytes,
        rss_bytes=now.rss_bytes,
    )


BLOCK_MARK = "@@edgelab-sample"


def proc_sampler_argv(interval_s: float = 1.0, pid: int | None = None, count: int | None = None) -> list[str]:
    """A POSIX shell loop printing one marked block of /proc readings per interval."""
    rss = f"grep VmRSS /proc/{int(pid)}/status 2>/dev/null; " if pid is not None else ""
    body = f"echo {BLOCK_MARK}; head -1 /proc/stat; grep MemAvailable /proc/meminfo; {rss}sleep {float(interval_s)}"
    loop = f'i=0; while [ -z "$1" ] || [ $i -lt "$1" ]; do {body}; i=$((i+1)); done; echo {BLOCK_MARK}'
    return ["sh", "-c", loop, "edgelab-proc", "" if count is None else str(int(count))]


def tegrastats_argv(interval_ms: int = 1000) -> list[str]:
    return ["tegrastats", "--interval", str(int(interval_ms))]


def sample_proc(
    transport: Transport,
    *,
    interval_s: float = 1.0,
    pid: int | None = None,
    count: int | None = None,
    device: str | None = None,
    clock: Clock = time.time,
) -> Iterator[ResourceSample]:
    """Run the /proc loop over ``transport`` and yield a sample per block (stamped at arrival)."""
    prev = None
    block: list[str] = []
    with transport.stream(proc_sampler_argv(interval_s, pid, count)) as proc:
        for line in proc.lines():
            if line.strip() != BLOCK_MARK:
                block.append(line)
                continue
            if block:
                now = parse_proc_block("\n".join(block))
                block = []
                if now is not None:
                    yield proc_sample(prev, now, t=clock(), device=device)
                    prev = now


def sample_tegrastats(
    transport: Transport, *, interval_ms: int = 1000, device: str | None = None, clock: Clock = time.time
) -> Iterator[ResourceSample]:
    with transport.stream(tegrastats_argv(interval_ms)) as proc:
        for line in proc.lines():
            s = from_tegrastats(line, t=clock(), device=device)
            if s is not None:
                yield s
