"""Windows collector (x64 and Windows on Arm, OpenSSH with PowerShell): one encoded PowerShell script.

The script is flat statements only (no functions, variables or hashtables), one per line, so
any PowerShell (5.1, 7) runs it and the virtual lab's PowerShell shim answers it statement by
statement. PowerShell gives no numeric status per statement that both could print, so every
Windows section ends with status 0; an empty section is how a failed source shows. CIM classes
come one section each and are joined into one ``{"Win32_Processor": [...], ...}`` document for
the CIM parser. There is no per-source timeout here: the probe's timeout bounds the whole script.
"""

from __future__ import annotations

import json

from edgelab.probe.collectors.base import Collector, Source
from edgelab.probe.collectors.sections import BEGIN, END, Section, check_name

CIM = {
    "cim_processor": (
        "Win32_Processor",
        "Name,Manufacturer,NumberOfCores,NumberOfLogicalProcessors,Architecture,MaxClockSpeed",
    ),
    "cim_computersystem": ("Win32_ComputerSystem", "Manufacturer,Model,Name,TotalPhysicalMemory,SystemType"),
    "cim_os": (
        "Win32_OperatingSystem",
        "Caption,Version,BuildNumber,OSArchitecture,TotalVisibleMemorySize,"
        "FreePhysicalMemory,SizeStoredInPagingFiles,TotalVirtualMemorySize",
    ),
    "cim_video": (
        "Win32_VideoController",
        "Name,AdapterCompatibility,DriverVersion,AdapterRAM,Status,PNPDeviceID",
    ),
}
PNP_PROPS = "FriendlyName,Manufacturer,Status,Class,InstanceId"
GPU_QUERY = "index,name,pci.bus_id,driver_version,memory.total,memory.used,temperature.gpu,compute_cap"


def _section(nonce: str, name: str, statement: str) -> list[str]:
    check_name(name)
    return [
        f"Write-Output '{BEGIN} {nonce} {name}@@'",
        statement,
        "Write-Output ''",
        f"Write-Output '{END} {nonce} {name} 0@@'",
    ]


def build_script(sources: tuple[Source, ...], nonce: str, per_source_timeout: float) -> str:
    """Each source's statement between its markers, in order (no per-source timeout here)."""
    lines = ["$env:WSL_UTF8 = '1'"]  # wsl.exe prints UTF-16 otherwise
    for src in sources:
        lines += _section(nonce, src.name, src.body)
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


def cim_document(sections: dict[str, Section]) -> dict[str, str]:
    """Join the per-class CIM sections into the batched document the CIM parser reads."""
    doc: dict[str, list] = {}
    classes = {**{n: cls for n, (cls, _p) in CIM.items()}, "pnp_accelerator": "PnpDevice"}
    for name, cls in classes.items():
        sec = sections.get(name)
        if sec is None or not sec.output.strip():
            continue
        try:
            data = json.loads(sec.output)
        except ValueError:
            continue  # the CIM parser never sees it; the raw section stays in the snapshot
        doc[cls] = data if isinstance(data, list) else [data]
    return {"cim_json": json.dumps(doc)} if doc else {}


def _cim(name: str, cls: str, props: str) -> Source:
    """One CIM class as JSON; no parser of its own: ``cim_document`` joins the classes for the CIM parser."""
    return Source(
        name,
        f"Get-CimInstance {cls} | ConvertTo-Json",
        None,
        f"Get-CimInstance {cls} | Select-Object {props} | ConvertTo-Json",
    )


# One entry per source, in script and merge order: section name, what an operator would type, the
# parser, then the PowerShell statement the script runs.
SOURCES = (
    *(_cim(name, cls, props) for name, (cls, props) in CIM.items()),
    Source(
        "pnp_accelerator",
        "Get-PnpDevice -Class ComputeAccelerator | ConvertTo-Json",
        None,
        f"Get-PnpDevice -Class ComputeAccelerator | Select-Object {PNP_PROPS} | ConvertTo-Json",
    ),
    Source("systeminfo", "systeminfo", "systeminfo", "systeminfo"),
    Source("wsl_version", "wsl --version", "wsl_version", "wsl --version"),
    Source(
        "nvidia_smi_csv",
        f"nvidia-smi --query-gpu={GPU_QUERY} --format=csv",
        "nvidia_smi_csv",
        f"nvidia-smi --query-gpu={GPU_QUERY} --format=csv",
    ),
    Source("nvidia_smi", "nvidia-smi", "nvidia_smi", "nvidia-smi"),
)

COLLECTOR = Collector("windows", 1, SOURCES, build_script, extra_outputs=cim_document)
