"""The SSH lab through plain OpenSSH clients: a real sshd, personas per address, sftp, PowerShell shim."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from edgelab.sim.sshd import free_port, persona_processes, ssh_lab_status, start_ssh_lab, stop_ssh_lab
from edgelab.transport.quoting import encode_powershell, join

pytestmark = pytest.mark.ssh


def ssh(lab, host: str, command: str, **kw) -> subprocess.CompletedProcess:
    argv = ["ssh", "-F", str(lab.ssh_config_path), "-o", "BatchMode=yes", host, command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, **kw)


def test_plain_ssh_reads_persona_file(ssh_lab):
    r = ssh(ssh_lab, "orin-agx", "cat /etc/nv_tegra_release")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# R36 (release), REVISION: 4.4, GCID: 41062509")
    assert not Path("/etc/nv_tegra_release").exists()


def test_each_address_is_its_own_persona(ssh_lab):
    seen = {}
    for name in ("orin-agx", "orin-nano", "thor", "wsl-hx370"):
        r = ssh(ssh_lab, name, "hostname; grep -c ^processor /proc/cpuinfo; uname -r")
        assert r.returncode == 0, r.stderr
        seen[name] = r.stdout.split()
    assert seen["orin-agx"] == ["orin-agx", "12", "5.15.148-tegra"]
    assert seen["orin-nano"] == ["orin-nano", "6", "5.10.192-tegra"]
    assert seen["thor"] == ["thor", "14", "6.8.12-tegra"]
    assert seen["wsl-hx370"] == ["wsl-hx370", "24", "6.6.87.2-microsoft-standard-WSL2"]


def test_exit_code_and_stderr_pass_through(ssh_lab):
    r = ssh(ssh_lab, "orin-nano", "echo to-out; echo to-err >&2; exit 37")
    assert (r.returncode, r.stdout, r.stderr) == (37, "to-out\n", "to-err\n")


def test_unknown_key_is_refused(ssh_lab, tmp_path):
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    # ssh's -F file names the lab key too; use a config without it to prove key auth is enforced.
    cfg = tmp_path / "cfg"
    cfg.write_text(ssh_lab.ssh_config_path.read_text().replace(str(ssh_lab.client_key_path), str(other)))
    r = subprocess.run(
        ["ssh", "-F", str(cfg), "-o", "BatchMode=yes", "orin-agx", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SSH_AUTH_SOCK": ""},
    )
    assert r.returncode == 255
    assert "Permission denied" in r.stderr


def test_sftp_and_scp_roundtrip(ssh_lab, tmp_path):
    data = os.urandom(300_000)
    src = tmp_path / "blob in.bin"
    src.write_bytes(data)
    remote = tmp_path / "remote side.bin"
    back = tmp_path / "back.bin"
    cfg = str(ssh_lab.ssh_config_path)
    r = subprocess.run(
        ["scp", "-F", cfg, "-o", "BatchMode=yes", str(src), f"orin-agx:{remote}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    batch = f'get "{remote}" "{back}"\nls /etc/nv_tegra_release\n'
    r = subprocess.run(
        ["sftp", "-F", cfg, "-b", "-", "orin-agx"], input=batch, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert "/etc/nv_tegra_release" in r.stdout  # the sftp-server runs inside the persona
    assert hashlib.sha256(back.read_bytes()).digest() == hashlib.sha256(data).digest()


def test_windows_persona_answers_encoded_powershell(ssh_lab):
    line = join(encode_powershell("Get-CimInstance Win32_Processor | ConvertTo-Json"), "powershell")
    r = ssh(ssh_lab, "win-hx370-rtx5090", line)
    assert r.returncode == 0, r.stderr
    import json

    cpu = json.loads(r.stdout)
    assert cpu["Name"] == "AMD Ryzen AI 9 HX 370 w/ Radeon 890M"
    assert cpu["NumberOfLogicalProcessors"] == 24
    # xelite-pc runs OpenSSH's default shell, cmd.exe: PowerShell text is not understood there ...
    r = ssh(ssh_lab, "xelite-pc", "(Get-CimInstance Win32_ComputerSystem).SystemType")
    assert r.returncode != 0 and "is not recognized as an internal or external command" in r.stderr
    # ... but the encoded form crosses both shells, and cmd expands %OS%
    r = ssh(
        ssh_lab,
        "xelite-pc",
        join(
            encode_powershell("(Get-CimInstance Win32_ComputerSystem).SystemType; systeminfo"), "powershell"
        ),
    )
    assert "System Type:                   ARM64-based PC" in r.stdout
    assert ssh(ssh_lab, "xelite-pc", "echo %OS%").stdout == "Windows_NT\n"
    assert ssh(ssh_lab, "win-hx370-rtx5090", "echo %OS%").stdout == "%OS%\n"


def test_powershell_errors_and_exit_codes(ssh_lab):
    r = ssh(ssh_lab, "win-hx370-rtx5090", "Get-Frobnicator -Now")
    assert r.returncode == 1
    assert "The term 'Get-Frobnicator' is not recognized" in r.stderr
    assert ssh(ssh_lab, "win-hx370-rtx5090", "Write-Output 'it''s'; exit 5").returncode == 5
    assert ssh(ssh_lab, "win-hx370-rtx5090", "Write-Output 'it''s'").stdout == "it's\n"
    r = ssh(ssh_lab, "xelite-pc", join(encode_powershell("nvidia-smi"), "powershell"))
    assert r.returncode == 1 and "not recognized" in r.stderr
    r = ssh(ssh_lab, "win-hx370-rtx5090", "nvidia-smi")
    assert "RTX 5090" in r.stdout and "24463MiB" in r.stdout


def test_powershell_file_hash_matches(ssh_lab, tmp_path):
    f = tmp_path / "h.bin"
    f.write_bytes(b"edgelab" * 1000)
    script = f"(Get-FileHash -Algorithm SHA256 -LiteralPath '{f}').Hash"
    encoded = base64.b64encode(script.encode("utf-16-le")).decode()
    r = ssh(ssh_lab, "win-hx370-rtx5090", f"powershell -NoProfile -NonInteractive -EncodedCommand {encoded}")
    assert r.stdout.strip() == hashlib.sha256(f.read_bytes()).hexdigest().upper()


def test_status_reports_running_lab(ssh_lab):
    st = ssh_lab_status(ssh_lab.state_dir)
    assert st is not None and st.pid == ssh_lab.pid
    assert [d.address for d in st.devices][:6] == [f"127.0.0.{i}" for i in range(11, 17)]
    assert st.host_key_fingerprint.startswith("SHA256:")


def test_start_is_idempotent_and_stop_leaves_nothing(tmp_path):
    port = free_port(["127.0.0.11", "127.0.0.17"])
    try:
        first = start_ssh_lab(tmp_path, ["orin-agx"], port=port, clones=1)
        again = start_ssh_lab(tmp_path, ["orin-agx"], port=port, clones=1)
        assert again.pid == first.pid
        assert [d.name for d in first.devices] == ["orin-agx", "orin-agx-c01"]
        # a detached process inside a persona must not outlive the lab
        r = ssh(first, "orin-agx-c01", "hostname; setsid sleep 600 </dev/null >/dev/null 2>&1 & echo started")
        assert r.stdout.split() == ["orin-agx-c01", "started"]
        assert persona_processes(tmp_path)
    finally:
        stop_ssh_lab(tmp_path)
    assert ssh_lab_status(tmp_path) is None
    assert persona_processes(tmp_path) == []
    assert (
        not Path(f"/proc/{first.pid}").exists()
        or "Z" in Path(f"/proc/{first.pid}/stat").read_text().split()[2]
    )
