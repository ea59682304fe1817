"""The virtual Windows device's shells on their own (no sshd): PowerShell cmdlet semantics, error
records and exit codes as Microsoft documents them, Start-Process/taskkill on real processes,
cmd.exe's %VAR% and 9009, Windows command-line quoting, the store-root fallback, telemetry."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgelab.metrics import wintelemetry
from edgelab.sim.persona_exec import persona_argv
from edgelab.sim.personas import PERSONAS_DIR
from edgelab.sim.winsim.native import split_command_line
from edgelab.transport import winscripts
from edgelab.transport.base import Capability, RunResult
from edgelab.transport.host import WindowsHost

WIN = PERSONAS_DIR / "win-hx370-rtx5090"
XELITE = PERSONAS_DIR / "xelite-pc"


@pytest.fixture
def drive(tmp_path):
    d = tmp_path / "C"
    for sub in ("Users/edgelab/AppData/Local/Temp", "ProgramData", "Windows"):
        (d / sub).mkdir(parents=True)
    return d


def ps(drive: Path, script: str, persona: Path = WIN, timeout: float = 60) -> subprocess.CompletedProcess:
    argv = persona_argv(
        persona, ["powershell", "-NoProfile", "-NonInteractive", "-Command", script], drive=drive
    )
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd="/")


def cmd(drive: Path, line: str, persona: Path = XELITE) -> subprocess.CompletedProcess:
    return subprocess.run(
        persona_argv(persona, ["cmd", "/c", line], drive=drive),
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )


# ------------------------------------------------------------------ command lines


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.text(
            alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
        ),
        max_size=5,
    )
)
def test_windows_quoting_round_trips_through_commandlinetoargvw(args):
    assert split_command_line(winscripts.join_windows_args(args)) == args


def test_commandlinetoargvw_backslash_rules():
    assert split_command_line(r'a\\\"b "c d" e\\"f g" h\i') == ['a\\"b', "c d", "e\\f g", "h\\i"]


# ------------------------------------------------------------------ PowerShell semantics


def test_file_cmdlets_follow_powershell_semantics(drive):
    r = ps(
        drive,
        r"""
New-Item -ItemType Directory -Force -Path 'C:\Users\edgelab\S' | Out-Null
Test-Path -LiteralPath 'c:\users\EDGELAB\s' -PathType Container
Test-Path -LiteralPath 'C:\Users\edgelab\S' -PathType Leaf
Set-Content -LiteralPath 'C:\Users\edgelab\S\a.txt' -Value 'one'
Set-Content -LiteralPath 'C:\Users\edgelab\S\b.txt' -Value 'two'
Move-Item -LiteralPath 'C:\Users\edgelab\S\a.txt' -Destination 'C:\Users\edgelab\S\b.txt'
"after: $?"
Move-Item -Force -LiteralPath 'C:\Users\edgelab\S\a.txt' -Destination 'C:\Users\edgelab\S\b.txt'
(Get-Item -LiteralPath 'C:/Users/edgelab/S/b.txt').Length
Get-ChildItem -File -LiteralPath 'C:\Users\edgelab\S' | ForEach-Object { $_.Name }
""",
    )
    assert r.stdout.splitlines() == ["True", "False", "after: False", "5", "b.txt"], r.stderr
    assert "Cannot create a file when that file already exists." in r.stderr
    assert (drive / "Users/edgelab/S/b.txt").read_bytes() == b"one\r\n"  # Set-Content writes CRLF lines
    assert r.returncode == 0


def test_errors_exit_codes_and_error_action(drive):
    r = ps(drive, r"Remove-Item -LiteralPath 'C:\nope'")
    assert r.returncode == 1
    assert "Remove-Item : Cannot find path 'C:\\nope' because it does not exist." in r.stderr
    assert "PathNotFound,Microsoft.PowerShell.Commands.RemoveItemCommand" in r.stderr
    r = ps(drive, r"Remove-Item -ErrorAction SilentlyContinue -LiteralPath 'C:\nope'; $?")
    assert (r.stdout, r.stderr, r.returncode) == ("False\n", "", 0)
    r = ps(drive, r"$ErrorActionPreference = 'Stop'; Get-Item -LiteralPath 'C:\nope'; 'not reached'")
    assert r.returncode == 1 and "not reached" not in r.stdout
    r = ps(drive, "Get-Frobnicator; 'continues'")  # not recognized is non-terminating by default
    assert r.stdout == "continues\n" and r.returncode == 0
    assert "Get-Frobnicator : The term 'Get-Frobnicator' is not recognized" in r.stderr
    r = ps(drive, "& 'false'")  # a native failure: powershell -Command exits 1 ($? false) ...
    assert r.returncode == 1
    r = ps(drive, "& 'sh' '-c' 'exit 7'; exit $LASTEXITCODE")  # ... unless the script passes it on
    assert r.returncode == 7


def test_get_filehash_default_table_and_property(drive):
    (drive / "h.bin").write_bytes(b"edgelab")
    r = ps(
        drive,
        r"Get-FileHash -LiteralPath 'C:\h.bin'; (Get-FileHash -Algorithm MD5 -LiteralPath 'C:\h.bin').Hash",
    )
    lines = r.stdout.splitlines()
    assert lines[1].split() == ["Algorithm", "Hash", "Path"]
    import hashlib

    assert lines[3].split() == ["SHA256", hashlib.sha256(b"edgelab").hexdigest().upper(), "C:\\h.bin"]
    assert lines[-1] == hashlib.md5(b"edgelab").hexdigest().upper()


def test_prefix_hash_builder_streams_the_first_bytes(drive):
    data = bytes(range(256)) * 10000
    (drive / "p.bin").write_bytes(data)
    import hashlib

    r = ps(drive, winscripts.sha256_prefix("C:\\p.bin", 1_500_001))
    assert r.stdout.strip() == hashlib.sha256(data[:1_500_001]).hexdigest(), r.stderr


def test_start_process_passthru_get_process_and_taskkill_tree(drive):
    (drive / "w").mkdir()
    line = winscripts.join_windows_args(
        [
            "-c",
            "import subprocess, time; subprocess.Popen(['sleep', '300']); "
            "print('a b', flush=True); time.sleep(300)",
        ]
    )
    r = ps(
        drive,
        f"$p = Start-Process -FilePath 'python3' -ArgumentList '{line.replace(chr(39), chr(39) * 2)}' "
        "-WorkingDirectory 'C:\\w' -RedirectStandardOutput 'C:\\w\\out.log' -RedirectStandardError "
        "'C:\\w\\err.log' -WindowStyle Hidden -PassThru; $p.Id",
    )
    pid = int(r.stdout.strip())
    end = time.monotonic() + 10
    while b"a b" not in (drive / "w/out.log").read_bytes() and time.monotonic() < end:
        time.sleep(0.05)
    assert (drive / "w/out.log").read_bytes() == b"a b\n", r.stderr
    r = ps(drive, winscripts.stop(pid))
    assert r.stdout.strip() == "left 0", r.stderr
    r = ps(drive, f"Get-Process -Id {pid}")
    assert r.returncode == 1 and f"Cannot find a process with the process identifier {pid}." in r.stderr


def test_taskkill_refuses_processes_outside_the_device(drive):
    r = ps(drive, "& 'taskkill.exe' '/F' '/PID' '1'")
    assert r.returncode == 1 and "Access is denied" in r.stderr


def test_store_root_falls_back_without_a_profile(drive, tmp_path):
    persona = tmp_path / "svc"
    shutil.copytree(WIN, persona)  # shims resolved, as the lab stages personas
    env = json.loads((persona / "data/env.json").read_text())
    for k in ("LOCALAPPDATA", "APPDATA", "USERPROFILE"):
        env.pop(k)
    (persona / "data/env.json").write_text(json.dumps(env))

    class Shim:
        name = "svc"

        @staticmethod
        def supports(capability):  # PowerShell, as the SSH transport to a Windows host declares
            return capability in Capability.WINDOWS_SHELL

        def run_ps(self, script, timeout=60):
            r = ps(drive, script, persona)
            return RunResult((script,), r.returncode, r.stdout, r.stderr)

    assert WindowsHost(Shim()).store_base() == ("C:\\ProgramData\\edgelab\\store", "ProgramData")


# ------------------------------------------------------------------ cmd.exe


def test_cmd_expands_percent_vars_and_fails_with_9009(drive):
    assert cmd(drive, "echo %OS%").stdout == "Windows_NT\n"
    r = cmd(drive, "no-such-program arg")
    assert r.returncode == 9009 & 0xFF  # cmd's 9009; a Linux exit status keeps its low byte only
    assert (
        r.stderr
        == "'no-such-program' is not recognized as an internal or external command,\noperable program or batch file.\n"
    )
    r = cmd(drive, 'sh -c "exit 3" && echo no || echo yes')
    assert r.stdout == "yes\n"
    r = cmd(drive, winscripts.windows_line("'from ps'; exit 4", "cmd"))
    assert (r.stdout, r.returncode) == ("from ps\n", 4)


# ------------------------------------------------------------------ telemetry


@pytest.mark.parametrize("persona,gpus", [(WIN, 1), (XELITE, 0)])
def test_sampler_output_parses_into_samples(drive, persona, gpus):
    r = ps(drive, winscripts.sampler(0.1, 2), persona)
    assert r.returncode == 0, r.stderr
    blocks = [b for b in r.stdout.split(winscripts.SAMPLE_MARK) if b.strip()]
    assert len(blocks) == 2
    s = wintelemetry.parse_sample(blocks[0], t=1.0, device=persona.name)
    assert s.resource.cpu_pct is not None and 0 <= s.resource.cpu_pct <= 100
    assert s.resource.mem_available_bytes and s.memory["commit_limit_bytes"] > s.memory["committed_bytes"] > 0
    assert len(s.gpus) == gpus and s.adapters and s.npus
    if gpus:
        g = s.gpus[0]
        assert g.source == "nvidia-smi:gpu0" and g.temps_c == {"gpu": 45.0} and g.power_w == {"gpu": 5.12}
        assert g.mem_available_bytes == (24463 - 798) * 1024 * 1024
        assert any("RTX 5090" in a["name"] for a in s.adapters)
        assert next(a for a in s.adapters if "NVIDIA" in a["name"])["adapter_ram_capped"]  # 32-bit AdapterRAM
    else:
        assert "Hexagon" in s.npus[0]["name"]
    assert s.raw["cpu"]["Name"] == "_Total"  # fields edgelab has no place for are kept


def test_parsers_keep_unknowns_as_none():
    s = wintelemetry.parse_sample("==cpu==\n\n==memory==\nnot json\n", t=0.0)
    assert s.resource.cpu_pct is None and s.resource.mem_available_bytes is None and s.gpus == []
    rows = wintelemetry.parse_nvidia_query("0, GPU, [N/A], 1, 2, 3, [N/A], 4, 5, P0")
    assert rows[0]["utilization.gpu"] is None and rows[0]["power.draw"] is None and rows[0]["pstate"] == "P0"
