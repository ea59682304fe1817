"""Windows telemetry: parsers of what ``winscripts.sampler`` prints, and the sampler over a transport.

One sample is sections (``==cpu==``, ``==memory==``, ``==os==``, ``==adapters==``, ``==npu==``,
``==nvidia==``) between ``@@edgelab-sample`` marks. Each section has a pure parser (text -> dict),
so captures from real machines become tests. Memory figures stay apart as DESIGN §2 wants: what
Windows reports available, the commit charge and its limit (RAM + pagefile), and each GPU's VRAM.
Every field a source does not give stays None; fields edgelab does not model are kept in ``raw``.
Placement evidence: the adapters and NPUs the device shows, and per-GPU utilisation/memory from
nvidia-smi (Windows ships it with the driver) -- seen, never assumed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from edgelab.metrics.events import ResourceSample
from edgelab.transport import winscripts
from edgelab.transport.base import Capability, Transport

Clock = Callable[[], float]
NVIDIA_FIELDS = winscripts.NVIDIA_QUERY.split(",")


def split_sections(text: str) -> dict[str, str]:
    """``==name==`` headed sections of one sample -> {name: body}."""
    out: dict[str, list[str]] = {}
    cur: str | None = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("==") and s.endswith("==") and len(s) > 4:
            cur = s[2:-2]
            out[cur] = []
        elif cur is not None:
            out[cur].append(line)
    return {k: "\n".join(v).strip() for k, v in out.items()}


def _json_rows(text: str) -> list[dict[str, Any]]:
    """ConvertTo-Json output: one object or an array of them ([] for nothing / not JSON)."""
    if not text.strip():
        return []
    try:
        data = json.loads(text)
    except ValueError:
        return []
    rows = data if isinstance(data, list) else [data]
    return [r for r in rows if isinstance(r, dict)]


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def parse_cpu_counters(text: str) -> dict[str, Any]:
    """Win32_PerfFormattedData_PerfOS_Processor (the ``_Total`` row): busy % of all cores."""
    rows = _json_rows(text)
    row = next((r for r in rows if r.get("Name") == "_Total"), rows[0] if rows else None)
    if row is None:
        return {"cpu_pct": None, "raw": {}}
    return {
        "cpu_pct": float(row["PercentProcessorTime"])
        if _int(row.get("PercentProcessorTime")) is not None
        else None,
        "raw": row,
    }


def parse_memory_counters(text: str) -> dict[str, Any]:
    """Win32_PerfFormattedData_PerfOS_Memory: available bytes, commit charge and commit limit."""
    rows = _json_rows(text)
    row = rows[0] if rows else {}
    return {
        "available_bytes": _int(row.get("AvailableBytes")),
        "committed_bytes": _int(row.get("CommittedBytes")),
        "commit_limit_bytes": _int(row.get("CommitLimit")),
        "raw": row,
    }


def parse_os_memory(text: str) -> dict[str, Any]:
    """Win32_OperatingSystem memory fields (KiB in CIM) -> bytes: physical total/free, virtual total/free."""
    rows = _json_rows(text)
    row = rows[0] if rows else {}

    def kib(key: str) -> int | None:
        v = _int(row.get(key))
        return None if v is None else v * 1024

    return {
        "physical_total_bytes": kib("TotalVisibleMemorySize"),
        "physical_free_bytes": kib("FreePhysicalMemory"),
        "virtual_total_bytes": kib("TotalVirtualMemorySize"),
        "virtual_free_bytes": kib("FreeVirtualMemory"),
        "raw": row,
    }


def parse_adapters(text: str) -> list[dict[str, Any]]:
    """Win32_VideoController rows: name, vendor, driver, PnP id; AdapterRAM is a 32-bit field (4 GiB cap),
    so it is reported as a lower bound, never as the VRAM."""
    out = []
    for r in _json_rows(text):
        ram = _int(r.get("AdapterRAM"))
        out.append(
            {
                "name": r.get("Name"),
                "vendor": r.get("AdapterCompatibility"),
                "driver": r.get("DriverVersion"),
                "pnp_id": r.get("PNPDeviceID"),
                "status": r.get("Status"),
                "adapter_ram_lower_bound_bytes": ram,
                "adapter_ram_capped": ram is not None and ram >= 0xFFF00000,
                "raw": r,
            }
        )
    return out


def parse_npus(text: str) -> list[dict[str, Any]]:
    """Get-PnpDevice -Class ComputeAccelerator (Device Manager's Neural processors)."""
    return [
        {
            "name": r.get("FriendlyName"),
            "vendor": r.get("Manufacturer"),
            "instance_id": r.get("InstanceId"),
            "status": r.get("Status"),
            "raw": r,
        }
        for r in _json_rows(text)
    ]


def _num(s: str) -> float | None:
    s = s.strip()
    if s in ("", "[N/A]", "N/A", "[Not Supported]"):
        return None
    try:
        return float(s)
    except ValueError:
        return None


def parse_nvidia_query(text: str, fields: list[str] | None = None) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits``: one dict per GPU."""
    fields = fields or NVIDIA_FIELDS
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            continue
        row: dict[str, Any] = {}
        for f, c in zip(fields, cells, strict=True):
            row[f] = c if f in ("name", "pstate", "pci.bus_id", "driver_version") else _num(c)
        out.append(row)
    return out


@dataclass
class WindowsSample:
    """One Windows reading: the ResourceSample the metrics store keeps, and what it has no field for."""

    resource: ResourceSample
    gpus: list[ResourceSample] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    adapters: list[dict[str, Any]] = field(default_factory=list)
    npus: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    def placement_evidence(self) -> dict[str, Any]:
        """Accelerators seen (names, not claims of use) and GPU activity at this instant."""
        return {
            "adapters": [a["name"] for a in self.adapters],
            "npus": [n["name"] for n in self.npus],
            "gpu_util_pct": {g.source: g.gpu_util_pct for g in self.gpus},
        }


def parse_sample(text: str, *, t: float, device: str | None = None) -> WindowsSample:
    """One sample's sections -> WindowsSample (host CPU/memory + one ResourceSample per NVIDIA GPU)."""
    sec = split_sections(text)
    cpu = parse_cpu_counters(sec.get("cpu", ""))
    mem = parse_memory_counters(sec.get("memory", ""))
    osm = parse_os_memory(sec.get("os", ""))
    avail = mem["available_bytes"] if mem["available_bytes"] is not None else osm["physical_free_bytes"]
    host = ResourceSample(
        t=t, device=device, source="windows-cim", cpu_pct=cpu["cpu_pct"], mem_available_bytes=avail
    )
    gpus = []
    for g in parse_nvidia_query(sec.get("nvidia", "")):
        idx = int(g["index"]) if g.get("index") is not None else len(gpus)
        clocks = {
            k: v for k, v in (("sm", g.get("clocks.sm")), ("mem", g.get("clocks.mem"))) if v is not None
        }
        gpus.append(
            ResourceSample(
                t=t,
                device=device,
                source=f"nvidia-smi:gpu{idx}",
                gpu_util_pct=g.get("utilization.gpu"),
                mem_available_bytes=(
                    int((g["memory.total"] - g["memory.used"]) * 1024 * 1024)
                    if g.get("memory.total") is not None and g.get("memory.used") is not None
                    else None
                ),
                temps_c={"gpu": g["temperature.gpu"]} if g.get("temperature.gpu") is not None else {},
                clocks_mhz=clocks,
                power_w={"gpu": g["power.draw"]} if g.get("power.draw") is not None else {},
            )
        )
    memory = {
        "available_bytes": avail,
        "committed_bytes": mem["committed_bytes"],
        "commit_limit_bytes": mem["commit_limit_bytes"],
        "physical_total_bytes": osm["physical_total_bytes"],
    }
    raw = {
        "cpu": cpu["raw"],
        "memory": mem["raw"],
        "os": osm["raw"],
        "nvidia": parse_nvidia_query(sec.get("nvidia", "")),
    }
    return WindowsSample(
        host, gpus, memory, parse_adapters(sec.get("adapters", "")), parse_npus(sec.get("npu", "")), raw
    )


def windows_sampler(interval_s: float = 1.0, count: int | None = None) -> str:
    """The PowerShell script that prints samples (``winscripts.sampler``); run it with ``Transport.stream``
    of ``powershell_argv`` or ``SSHTransport.run_ps``."""
    return winscripts.sampler(interval_s, count)


def sample_windows(
    transport: Transport,
    *,
    interval_s: float = 1.0,
    count: int | None = None,
    device: str | None = None,
    clock: Clock = time.time,
) -> Iterator[WindowsSample]:
    """Stream the sampler over an SSH transport to a Windows device; a WindowsSample per block, stamped
    on the lab clock when the block is complete. Cancel by closing the generator."""
    from edgelab.transport.quoting import encode_powershell

    proc = (
        transport.stream_ps(windows_sampler(interval_s, count))
        if transport.supports(Capability.WINDOWS_SHELL)
        else transport.stream(encode_powershell(windows_sampler(interval_s, count)))
    )
    block: list[str] | None = None
    with proc:
        for line in proc.lines():
            if line.strip() == winscripts.SAMPLE_MARK:
                if block:
                    yield parse_sample("\n".join(block), t=clock(), device=device)
                block = []
            elif block is not None:
                block.append(line)
