"""PowerShell script builders for Windows devices (store, push, launch, stop, stream, telemetry).

Pure functions of their arguments: every value goes in through ``quote_powershell`` (or as an
integer), so nothing a user typed becomes PowerShell syntax. They use only what
``edgelab.transport.winps`` lists. Windows PowerShell 5.1 is the floor (what Windows 11 ships).

How a script reaches the device is ``windows_line``: OpenSSH for Windows hands the command line
to its DefaultShell, ``cmd.exe /c`` unless configured, or ``powershell.exe -c``. cmd.exe expands
``%VAR%`` and treats ``& | < > ^`` as syntax, and either shell's Win32 command-line parsing eats
double quotes, so a script travels as ``powershell -EncodedCommand <base64 UTF-16LE>`` (which both
parse the same); only to a PowerShell shell, and only when it has no double quote, newline or
run of spaces, does it go as plain text, saving a second PowerShell start.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from edgelab.transport.quoting import encode_powershell, quote_powershell

PID_MARKER = "@@edgelab-pid "


def q(value: str) -> str:
    return quote_powershell(str(value))


def windows_line(script: str, login_shell: str = "cmd") -> str:
    """The SSH command line that runs ``script`` under the device's default shell (cmd | powershell)."""
    if login_shell == "powershell":
        if not re.search(r'["\n\r\t]| {2}|[\u201c\u201d\u201e]', script):
            return script
        # the outer powershell -c would map the inner one's exit code to 0/1 ($?): pass it on
        return " ".join(encode_powershell(script)) + "; exit $LASTEXITCODE"
    return " ".join(encode_powershell(script))


def parse_detect(stdout: str) -> str:
    """Which shell answered ``winps.DETECT_LINE``: cmd expands %OS% (Windows_NT), PowerShell echoes it."""
    text = stdout.strip()
    if text == "Windows_NT":
        return "cmd"
    if text == "%OS%":
        return "powershell"
    return "unknown"


# ------------------------------------------------------------------ Windows command lines


def quote_windows_arg(arg: str) -> str:
    """One argument for a Windows command line, read back exactly by CommandLineToArgvW / the MSVC runtime."""
    if arg and not re.search(r'[\s"]', arg):
        return arg
    out, backslashes = ['"'], 0
    for ch in arg:
        if ch == "\\":
            backslashes += 1
            continue
        if ch == '"':
            out.append("\\" * (2 * backslashes + 1) + '"')
        else:
            out.append("\\" * backslashes + ch)
        backslashes = 0
    out.append("\\" * (2 * backslashes) + '"')
    return "".join(out)


def join_windows_args(argv: Sequence[str]) -> str:
    return " ".join(quote_windows_arg(str(a)) for a in argv)


def invoke(argv: Sequence[str]) -> str:
    """``& 'prog' 'arg'...``: a native program with its arguments verbatim."""
    if not argv:
        raise ValueError("empty command")
    return "& " + " ".join(q(a) for a in argv)


def run_native(argv: Sequence[str]) -> str:
    """Run ``argv`` and exit with its exit code; 1 when it could not start (powershell -Command itself
    maps every native failure to 1). The pid line first lets a timeout kill the tree."""
    return (
        f'"{PID_MARKER}$PID"\n{invoke(argv)}\n'
        "if (-not $?) { if ($LASTEXITCODE) { exit $LASTEXITCODE }; exit 1 }"
    )


def stream_native(argv: Sequence[str]) -> str:
    """Print this PowerShell's pid (``@@edgelab-pid N``), then run ``argv``: cancel kills that tree."""
    return run_native(argv)


# ------------------------------------------------------------------ profile, clock


def env_bases() -> str:
    """Where a store may live: %LOCALAPPDATA% (a user profile), else %ProgramData%, else %TEMP%."""
    return '"L=$env:LOCALAPPDATA"; "P=$env:ProgramData"; "T=$env:TEMP"; "U=$env:USERPROFILE"'


def pick_base(stdout: str) -> tuple[str | None, str | None]:
    """(directory, variable) from ``env_bases`` output: the first of LOCALAPPDATA, ProgramData, TEMP set."""
    vals = {}
    for line in stdout.splitlines():
        key, _, value = line.strip().partition("=")
        vals[key] = value.strip()
    for key, name in (("L", "LOCALAPPDATA"), ("P", "ProgramData"), ("T", "TEMP")):
        if vals.get(key):
            return vals[key], name
    return None, None


def profile_dir(stdout: str) -> str | None:
    for line in stdout.splitlines():
        if line.startswith("U="):
            return line[2:].strip() or None
    return None


def clock_ms() -> str:
    return "[DateTimeOffset]::UtcNow.ToUnixTimeMilliseconds()"


# ------------------------------------------------------------------ store

_STAT = '"$($i.Length)|$($i.LastWriteTimeUtc.Ticks)"'


def mkdir(path: str) -> str:
    return f"New-Item -ItemType Directory -Force -Path {q(path)} | Out-Null"


def inspect(root: str, paths: Sequence[str]) -> str:
    """Make the store; per path ``size|ticks`` (LastWriteTimeUtc: any write moves it) or ``-``."""
    items = ", ".join(q(p) for p in paths)
    return (
        f"$ErrorActionPreference = 'Stop'\n{mkdir(root)}\n"
        f"foreach ($f in @({items})) {{ if (Test-Path -LiteralPath $f -PathType Leaf) "
        f"{{ $i = Get-Item -LiteralPath $f; {_STAT} }} else {{ '-' }} }}"
    )


def stat(path: str) -> str:
    return f"$ErrorActionPreference = 'Stop'\n$i = Get-Item -LiteralPath {q(path)}\n{_STAT}"


def sha256(path: str) -> str:
    return f"(Get-FileHash -Algorithm SHA256 -LiteralPath {q(path)}).Hash"


def sha256_prefix(path: str, n: int) -> str:
    """SHA-256 of the first ``n`` bytes, streamed in 1 MiB reads (a resumed push checks its ``.part``)."""
    return (
        f"$ErrorActionPreference = 'Stop'\n$f = [IO.File]::OpenRead({q(path)})\n"
        "$h = [Security.Cryptography.SHA256]::Create()\n$b = New-Object byte[] 1048576\n"
        f"$left = {int(n)}\n"
        "while ($left -gt 0) { $n = $f.Read($b, 0, [Math]::Min($b.Length, $left)); if ($n -le 0) { break }; "
        "[void]$h.TransformBlock($b, 0, $n, $null, 0); $left -= $n }\n"
        "[void]$h.TransformFinalBlock($b, 0, 0)\n$f.Close()\n"
        "-join ($h.Hash | ForEach-Object { $_.ToString('x2') })"
    )


def finalize(part: str, sha: str, blob: str) -> str:
    """Hash ``.part``; on a match rename it over ``blob`` and print its stat; else remove it, exit 3."""
    return (
        f"$ErrorActionPreference = 'Stop'\n"
        f"$h = (Get-FileHash -Algorithm SHA256 -LiteralPath {q(part)}).Hash\n"
        f'if ($h -ne {q(sha)}) {{ Remove-Item -Force -LiteralPath {q(part)}; "mismatch $h"; exit 3 }}\n'
        f"Move-Item -Force -LiteralPath {q(part)} -Destination {q(blob)}\n"
        f"$i = Get-Item -LiteralPath {q(blob)}\n{_STAT}"
    )


def move(src: str, dst: str) -> str:
    return f"Move-Item -Force -LiteralPath {q(src)} -Destination {q(dst)}"


def remove(paths: Sequence[str]) -> str:
    """``rm -f``: remove what exists; a file that cannot be removed is an error (exit 1)."""
    items = ", ".join(q(p) for p in paths)
    return (
        f"$ErrorActionPreference = 'Stop'\nforeach ($f in @({items})) "
        "{ if (Test-Path -LiteralPath $f) { Remove-Item -Force -LiteralPath $f } }"
    )


def list_files(root: str) -> str:
    return (
        f"if (Test-Path -LiteralPath {q(root)}) {{ Get-ChildItem -File -LiteralPath {q(root)} | "
        'ForEach-Object { "$($_.Length) $($_.Name)" } }'
    )


# ------------------------------------------------------------------ detached launch, stop


def runner(argv: Sequence[str], env: dict[str, str] | None, workdir: str) -> str:
    """What the detached PowerShell runs: set the environment, Start-Process the program with its
    output redirected into ``workdir`` (byte for byte: handles, not the PowerShell pipeline), wait,
    record the exit code in ``exit``."""
    wd = workdir.rstrip("\\/")
    lines = [f"$env:{k} = {q(v)}" for k, v in (env or {}).items()]
    lines += [
        f"$wd = {q(wd)}",
        f"$p = Start-Process -FilePath {q(argv[0])} -ArgumentList {q(join_windows_args(argv[1:]) or ' ')} "
        "-WorkingDirectory $wd -RedirectStandardOutput (Join-Path $wd 'stdout.log') "
        "-RedirectStandardError (Join-Path $wd 'stderr.log') -NoNewWindow -PassThru -Wait",
        "$code = $p.ExitCode",
        "Set-Content -LiteralPath (Join-Path $wd 'exit') -Value $code",
        "exit $code",
    ]
    return "\n".join(lines)


def launch(workdir: str, argv: Sequence[str], env: dict[str, str] | None = None) -> str:
    """Start ``argv`` detached; writes ``pid`` (the runner's, the root of the run's process tree) in
    ``workdir`` and prints it.

    OpenSSH for Windows runs each session in a job object that kills every process in it when the
    session's shell exits, and Start-Process does not break away from it. So the runner (see
    ``runner``) is created by the WMI service (Win32_Process.Create, outside the job), and it
    Start-Process -PassThru's the program with redirected output.
    """
    if not argv:
        raise ValueError("empty command")
    if any(not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) for k in (env or {})):
        raise ValueError("environment variable names must be identifiers")
    wd = workdir.rstrip("\\/")
    line = " ".join(["powershell.exe", *encode_powershell(runner(argv, env, wd))[1:]])
    return (
        f"$ErrorActionPreference = 'Stop'\n$wd = {q(wd)}\n"
        "New-Item -ItemType Directory -Force -Path $wd | Out-Null\n"
        "foreach ($f in @('pid', 'exit')) { $p = Join-Path $wd $f; "
        "if (Test-Path -LiteralPath $p) { Remove-Item -Force -LiteralPath $p } }\n"
        "$r = Invoke-CimMethod -ClassName Win32_Process -MethodName Create "
        f"-Arguments @{{ CommandLine = {q(line)}; CurrentDirectory = $wd }}\n"
        'if ($r.ReturnValue -ne 0) { "Win32_Process.Create returned $($r.ReturnValue)"; exit 1 }\n'
        "Set-Content -LiteralPath (Join-Path $wd 'pid') -Value $r.ProcessId\n$r.ProcessId"
    )


def layout(bin_dir: str, links: Sequence[tuple[str, str]]) -> str:
    """``bin_dir`` holding one hard link per (name, store blob): a program finds its files by name.
    Hard links, not symbolic ones (those need a privilege on Windows); the store and the run dirs
    are on the same volume (the user profile). A missing blob exits 98."""
    lines = [
        "$ErrorActionPreference = 'Stop'",
        f"$bin = {q(bin_dir)}",
        "New-Item -ItemType Directory -Force -Path $bin | Out-Null",
    ]
    for name, blob in links:
        lines += [
            f"if (-not (Test-Path -LiteralPath {q(blob)} -PathType Leaf)) {{ 'missing blob {blob.replace(chr(39), chr(39) * 2)}'; exit 98 }}",
            f"$l = Join-Path $bin {q(name)}",
            "if (Test-Path -LiteralPath $l) { Remove-Item -Force -LiteralPath $l }",
            f"New-Item -ItemType HardLink -Path $l -Target {q(blob)} | Out-Null",
        ]
    return "\n".join(lines)


def alive(pid: int) -> str:
    return f"if (Get-Process -Id {int(pid)} -ErrorAction SilentlyContinue) {{ 'alive' }} else {{ 'gone' }}"


def tree_left(pid: int) -> str:
    """How many processes of ``pid``'s tree (by ParentProcessId, as taskkill /T walks it) are alive."""
    return (
        f"$root = {int(pid)}\n"
        "$all = @(Get-CimInstance -ClassName Win32_Process | Select-Object -Property ProcessId, ParentProcessId)\n"
        "$tree = @($root)\n$i = 0\n"
        "while ($i -lt $tree.Count) { $id = $tree[$i]; "
        "$tree += @($all | Where-Object { $_.ParentProcessId -eq $id } | ForEach-Object { $_.ProcessId }); "
        "$i++ }\n"
    )


def stop(pid: int) -> str:
    """Kill ``pid`` and its whole tree (taskkill /T /F), then print ``left N`` (survivors of that tree)."""
    return (
        tree_left(pid) + f"& 'taskkill.exe' '/T' '/F' '/PID' '{int(pid)}' 2>&1 | Out-Null\n"
        '$left = @(Get-Process -Id $tree -ErrorAction SilentlyContinue)\n"left $($left.Count)"'
    )


def tree_memory(pid: int) -> str:
    """``n rss peak``: live processes of ``pid``'s tree, their working sets summed, the largest peak
    working set (Win32_Process WorkingSetSize / PeakWorkingSetSize, the latter in KiB)."""
    return (
        f"$root = {int(pid)}\n"
        "$all = @(Get-CimInstance -ClassName Win32_Process | "
        "Select-Object -Property ProcessId, ParentProcessId, WorkingSetSize, PeakWorkingSetSize)\n"
        "$tree = @($all | Where-Object { $_.ProcessId -eq $root })\n$i = 0\n"
        "while ($i -lt $tree.Count) { $id = $tree[$i].ProcessId; "
        "$tree += @($all | Where-Object { $_.ParentProcessId -eq $id }); $i++ }\n"
        "$rss = 0\n$peak = 0\n"
        "foreach ($p in $tree) { $rss += $p.WorkingSetSize; "
        "if ($p.PeakWorkingSetSize -gt $peak) { $peak = $p.PeakWorkingSetSize } }\n"
        '"$($tree.Count) $rss $peak"'
    )


def kill_tree(pid: int) -> str:
    """Cancel of a stream: the tree of the PowerShell that printed its pid."""
    return f"& 'taskkill.exe' '/T' '/F' '/PID' '{int(pid)}' 2>&1 | Out-Null\nexit 0"


def follow_log(path: str) -> str:
    """``tail -f``: the file's lines, then each new one as it is written (Get-Content -Wait)."""
    return f"Get-Content -LiteralPath {q(path)} -Wait"


# ------------------------------------------------------------------ event log

EVENT_POLL_MS = 2000  # Get-WinEvent has no follow mode: a follower asks again this often


def _event_lines(var: str) -> str:
    """Print the events in ``$var`` (newest first, as Get-WinEvent returns them) oldest first, one line each:
    ``time id level provider: message`` with the message's line breaks folded."""
    line = (
        "$e.TimeCreated.ToString('yyyy-MM-dd HH:mm:ss') + ' ' + $e.Id + ' ' + $e.LevelDisplayName + ' ' + "
        "$e.ProviderName + ': ' + ($e.Message -replace '\\s+', ' ')"
    )
    return f"$i = ${var}.Count; while (0 -lt $i) {{ $i -= 1; $e = ${var}[$i]; {line} }}"


def event_log(lines: int, follow: bool = False, log_name: str = "System") -> str:
    """The newest ``lines`` events of a Windows event log (Get-WinEvent), oldest first; with ``follow``,
    then every newer event (by RecordId) as it is written, until killed."""
    n = int(lines)
    script = (
        f"$ev = @(Get-WinEvent -LogName {q(log_name)} -MaxEvents {n} -ErrorAction Stop); "
        + _event_lines("ev")
    )
    if follow:
        script += (
            "; $last = 0; if ($ev.Count) { $last = $ev[0].RecordId }; while ($true) { "
            f"Start-Sleep -Milliseconds {EVENT_POLL_MS}; "
            f"$new = @(Get-WinEvent -LogName {q(log_name)} -MaxEvents 200 -ErrorAction Stop | "
            "Where-Object { $_.RecordId -gt $last }); "
            + _event_lines("new")
            + "; if ($new.Count) { $last = $new[0].RecordId } }"
        )
    return script


# ------------------------------------------------------------------ telemetry

NVIDIA_QUERY = (
    "index,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,clocks.sm,"
    "clocks.mem,pstate"
)


SAMPLE_MARK = "@@edgelab-sample"


def sample_body() -> str:
    """One telemetry sample in sections (``==name==`` then its output): CPU and memory counters from
    CIM, the display adapters and NPUs seen, and nvidia-smi's query where the device has it."""
    return "\n".join(
        [
            "'==cpu=='",
            "Get-CimInstance -ClassName Win32_PerfFormattedData_PerfOS_Processor -Filter \"Name='_Total'\" | "
            "ConvertTo-Json -Compress",
            "'==memory=='",
            "Get-CimInstance -ClassName Win32_PerfFormattedData_PerfOS_Memory | ConvertTo-Json -Compress",
            "'==os=='",
            "Get-CimInstance -ClassName Win32_OperatingSystem | "
            "Select-Object -Property TotalVisibleMemorySize, FreePhysicalMemory, TotalVirtualMemorySize, "
            "FreeVirtualMemory | ConvertTo-Json -Compress",
            "'==adapters=='",
            "Get-CimInstance -ClassName Win32_VideoController | ConvertTo-Json -Compress",
            "'==npu=='",
            "Get-PnpDevice -Class ComputeAccelerator -PresentOnly -ErrorAction SilentlyContinue | "
            "ConvertTo-Json -Compress",
            "'==nvidia=='",
            "if (Get-Command -Name 'nvidia-smi.exe' -ErrorAction SilentlyContinue) "
            f"{{ & 'nvidia-smi.exe' '--query-gpu={NVIDIA_QUERY}' '--format=csv,noheader,nounits' }}",
        ]
    )


def sampler(interval_s: float = 1.0, count: int | None = None) -> str:
    """``SAMPLE_MARK`` then one sample, every ``interval_s`` (``count`` times, or until cancelled)."""
    cond = "$true" if count is None else f"$n -lt {int(count)}"
    body = sample_body().replace("\n", "; ")
    return (
        f"$n = 0\nwhile ({cond}) {{ '{SAMPLE_MARK}'; {body}; $n++; "
        f"Start-Sleep -Milliseconds {int(interval_s * 1000)} }}\n'{SAMPLE_MARK}'"
    )


def samples() -> dict[str, str]:
    """Every builder with sample arguments (nasty ones): what the drift test parses."""
    root = "C:\\Users\\it's me\\AppData\\Local\\edgelab\\store"
    sha = "ab" * 32
    blob, part = root + "\\" + sha, root + "\\" + sha + ".part"
    return {
        "run_native": run_native(["C:\\Program Files\\x.exe", "a b", "it's", "$(x)", '"q"']),
        "env_bases": env_bases(),
        "clock_ms": clock_ms(),
        "mkdir": mkdir(root),
        "inspect": inspect(root, [blob, part]),
        "stat": stat(blob),
        "sha256": sha256(blob),
        "sha256_prefix": sha256_prefix(part, 12345),
        "finalize": finalize(part, sha, blob),
        "move": move(part, blob),
        "remove": remove([part, blob]),
        "list_files": list_files(root),
        "runner": runner(["python.exe", "-m", "x y"], {"PYTHONPATH": "C:\\a b\\z.pyz"}, "C:\\w"),
        "launch": launch("C:\\runs\\r 1\\ref", ["python.exe", "-m", "edgelab.reference", "it's"], {"A": "b"}),
        "alive": alive(42),
        "layout": layout("C:\\runs\\r1\\bin", [("llama-server.exe", blob), ("it's.dll", part)]),
        "stop": stop(42),
        "tree_memory": tree_memory(42),
        "follow_log": follow_log(root + "\\stdout.log"),
        "event_log": event_log(50, True, "it's"),
        "kill_tree": kill_tree(42),
        "sampler": sampler(0.5, 2),
    }
