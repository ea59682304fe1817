"""Windows collector (x64 and Windows on Arm, OpenSSH with PowerShell): one encoded PowerShell script.

Every section is one line of the script, ``B name; ...; E name <exit>``, so the virtual lab's
PowerShell shim can answer it line by line from the persona's captures.
"""

from __future__ import annotations

from edgelab.probe.collectors.base import Collector, Source
from edgelab.probe.collectors.sections import BEGIN, END, check_name
from edgelab.transport.quoting import Shell

CIM = {
    "Win32_Processor": "Name,Manufacturer,NumberOfCores,NumberOfLogicalProcessors,Architecture,MaxClockSpeed",
    "Win32_ComputerSystem": "Manufacturer,Model,Name,TotalPhysicalMemory,SystemType",
    "Win32_OperatingSystem": "Caption,Version,BuildNumber,OSArchitecture,TotalVisibleMemorySize,"
    "FreePhysicalMemory,SizeStoredInPagingFiles,TotalVirtualMemorySize",
    "Win32_VideoController": "Name,AdapterCompatibility,DriverVersion,AdapterRAM,Status,PNPDeviceID",
}
PNP = "FriendlyName,Manufacturer,Status,Class,InstanceId"
GPU_QUERY = "index,name,pci.bus_id,driver_version,memory.total,memory.used,temperature.gpu,compute_cap"

PRELUDE = """$ErrorActionPreference = 'SilentlyContinue'; $ProgressPreference = 'SilentlyContinue'
[Console]::OutputEncoding = [Text.Encoding]::UTF8; $env:WSL_UTF8 = '1'
function B($n) { Write-Output "{begin} $N $n@@" }
function E($n, $c) { Write-Output ''; Write-Output "{end} $N $n $c@@" }
function X { if ($?) { 0 } else { 1 } }
"""


def _cim_line() -> str:
    parts = [f"'{cls}' = @(Get-CimInstance {cls} | Select-Object {props})" for cls, props in CIM.items()]
    parts.append(f"'PnpDevice' = @(Get-PnpDevice -Class ComputeAccelerator | Select-Object {PNP})")
    return ("B cim; $o = [ordered]@{ " + "; ".join(parts) + " }; "
            "$o | ConvertTo-Json -Depth 4 -Compress; E cim (X)")


def _native(name: str, exe: str, args: str) -> str:
    check_name(name)
    return (f"if (Get-Command {exe} -ErrorAction SilentlyContinue) "
            f"{{ B {name}; & {exe} {args} | Out-String -Width 400 | Write-Output; E {name} $LASTEXITCODE }}")


def build_script(nonce: str, per_source_timeout: float) -> str:
    lines = [f"$N = '{nonce}'", PRELUDE.replace("{begin}", BEGIN).replace("{end}", END)]
    lines.append(_cim_line())
    lines.append(_native("systeminfo", "systeminfo", ""))
    lines.append(_native("wsl_version", "wsl", "--version"))
    lines.append(_native("nvidia_smi_csv", "nvidia-smi", f"--query-gpu={GPU_QUERY} --format=csv"))
    lines.append(_native("nvidia_smi", "nvidia-smi", ""))
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


SOURCES = (
    Source("cim", "Get-CimInstance Win32_* / Get-PnpDevice -Class ComputeAccelerator | ConvertTo-Json", "cim_json"),
    Source("systeminfo", "systeminfo", "systeminfo"),
    Source("wsl_version", "wsl --version", "wsl_version"),
    Source("nvidia_smi_csv", f"nvidia-smi --query-gpu={GPU_QUERY} --format=csv", "nvidia_smi_csv"),
    Source("nvidia_smi", "nvidia-smi", "nvidia_smi"),
)

COLLECTOR = Collector("windows", 1, SOURCES, build_script, Shell.POWERSHELL)
