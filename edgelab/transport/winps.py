"""The one list of what edgelab sends to Windows: cmdlets (with the parameters used), native programs,
.NET members and automatic variables.

The PowerShell script builders (``edgelab.transport.winscripts``, and the probe's Windows collector
``edgelab.probe.collectors.windows``) may only use what is listed here,
and the virtual Windows personas (``edgelab.sim.winsim``) must answer every entry;
``tests/transport/test_winps_surface.py`` parses every builder's output and checks both, so the two cannot
drift apart. Adding a command to a builder means adding it here and to the shim.
"""

from __future__ import annotations

# cmdlet -> the parameters edgelab passes (Microsoft's parameter names)
CMDLETS: dict[str, tuple[str, ...]] = {
    "New-Item": ("ItemType", "Force", "Path", "Target"),  # Directory | HardLink
    "Test-Path": ("LiteralPath", "PathType"),
    "Get-Item": ("LiteralPath",),
    "Get-ChildItem": ("File", "LiteralPath"),
    "Move-Item": ("Force", "LiteralPath", "Destination"),
    "Remove-Item": ("Force", "LiteralPath"),
    "Get-FileHash": ("Algorithm", "LiteralPath"),
    "Get-Content": ("LiteralPath", "Wait"),
    "Set-Content": ("LiteralPath", "Value"),
    "Join-Path": (),
    "Start-Process": (
        "FilePath",
        "ArgumentList",
        "WorkingDirectory",
        "RedirectStandardOutput",
        "RedirectStandardError",
        "NoNewWindow",
        "PassThru",
        "Wait",
    ),
    "Invoke-CimMethod": ("ClassName", "MethodName", "Arguments"),  # Win32_Process.Create: outside the SSH job
    "Get-Process": ("Id", "ErrorAction"),
    "Get-CimInstance": ("ClassName", "Filter"),  # the probe names the class positionally
    "Get-PnpDevice": ("Class", "PresentOnly", "ErrorAction"),
    "Get-WinEvent": ("LogName", "MaxEvents", "ErrorAction"),  # device logs: the System event log
    "Select-Object": ("Property",),
    "Where-Object": (),
    "ForEach-Object": (),
    "ConvertTo-Json": ("Compress", "Depth"),
    "New-Object": (),
    "Get-Command": ("Name", "ErrorAction"),
    "Start-Sleep": ("Milliseconds",),
    "Out-Null": (),
    "Write-Output": (),
}

# Windows programs edgelab runs (besides the workload itself)
NATIVES: tuple[str, ...] = ("powershell.exe", "taskkill.exe", "nvidia-smi.exe", "systeminfo.exe", "wsl.exe")

# type literal :: member
STATIC: tuple[str, ...] = (
    "[DateTimeOffset]::UtcNow",
    "[IO.File]::OpenRead",
    "[Math]::Min",
    "[Security.Cryptography.SHA256]::Create",
)

# instance members used on objects the listed cmdlets return
MEMBERS: tuple[str, ...] = (
    "Length",
    "LastWriteTimeUtc",
    "Ticks",
    "Name",
    "Hash",
    "Id",
    "Count",
    "ProcessId",
    "ParentProcessId",
    "ReturnValue",
    "ExitCode",
    "WorkingSetSize",
    "PeakWorkingSetSize",
    "ToUnixTimeMilliseconds",
    "Read",
    "Close",
    "TransformBlock",
    "TransformFinalBlock",
    "ToString",
    "RecordId",
    "TimeCreated",
    "LevelDisplayName",
    "ProviderName",
    "Message",  # Get-WinEvent's records
)
TYPES: tuple[str, ...] = ("byte[]", "void")  # New-Object byte[] N; [void] casts

# automatic and preference variables ($env:NAME is any environment variable)
VARIABLES: tuple[str, ...] = (
    "env:*",
    "PID",
    "LASTEXITCODE",
    "?",
    "ErrorActionPreference",
    "null",
    "true",
    "_",
)

# statement keywords and operators the builders use
KEYWORDS: tuple[str, ...] = ("if", "else", "foreach", "while", "exit", "break")
OPERATORS: tuple[str, ...] = (
    "-eq",
    "-ne",
    "-lt",
    "-gt",
    "-le",
    "-not",
    "-and",
    "-join",
    "-replace",
    "+",
    "-",
    "+=",
    "-=",
    "++",
    "=",
    ",",
    "|",
    "2>&1",
    "[void]",
)

# what each shell that OpenSSH for Windows may run answers to the detection line
DETECT_LINE = "echo %OS%"
