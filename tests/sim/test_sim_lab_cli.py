"""`edgelab sim up/status/ssh-config/down` end to end: real labs, a tmp database, nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgelab.sim.sshd import free_port, persona_processes

pytestmark = [pytest.mark.ssh, pytest.mark.adb, pytest.mark.slow]


def edgelab(env, *args, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [sys.executable, "-c", "from edgelab.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    if check:
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


def _pid_gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"
    except OSError:
        return True


def test_sim_up_registers_every_device_and_down_leaves_nothing(tmp_path):
    sim = tmp_path / "sim"
    env = {
        **os.environ,
        "EDGELAB_HOME": str(tmp_path / "home"),
        "EDGELAB_DB": str(tmp_path / "lab.db"),
        "EDGELAB_SIM_DIR": str(sim),
    }
    port = str(free_port(["127.0.0.11", "127.0.0.16"]))
    status = None
    try:
        up = edgelab(env, "sim", "up", "--ssh-port", port, "--json")
        status = json.loads(up.stdout)
        assert "registering" in up.stderr  # progress goes to stderr, JSON alone on stdout
        again = json.loads(edgelab(env, "sim", "up", "--ssh-port", port, "--json").stdout)
        assert again["ssh"]["pid"] == status["ssh"]["pid"]  # idempotent
        assert again["adb"]["server_pid"] == status["adb"]["server_pid"]

        devices = json.loads(edgelab(env, "device", "ls", "--json").stdout)
        by_name = {d["name"]: d for d in devices}
        ssh_names = ["orin-agx", "orin-nano", "thor", "wsl-hx370", "win-hx370-rtx5090", "xelite-pc"]
        for name in ssh_names + ["s25", "s24", "rb3g2", "sa8775p"]:
            assert by_name[name]["virtual"] is True, name
            assert by_name[name]["state"] == "online", (name, by_name[name])
        assert by_name["win-hx370-rtx5090"]["shell"] == "powershell"
        assert by_name["orin-agx"]["class"] == "jetson"
        assert by_name["orin-agx"]["host_key_fingerprint"] == status["ssh"]["host_key_fingerprint"]

        st = json.loads(edgelab(env, "sim", "status", "--json").stdout)
        addrs = {d["name"]: (d["address"], d["port"]) for d in st["devices"]}
        assert addrs["thor"] == ("127.0.0.13", int(port))
        assert st["adb"]["adb_server"].startswith("127.0.0.1:")

        config = edgelab(env, "sim", "ssh-config").stdout
        cfg = tmp_path / "ssh_config"
        cfg.write_text(config)
        r = subprocess.run(
            ["ssh", "-F", str(cfg), "-o", "BatchMode=yes", "thor", "nvpmodel -q"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.stdout.startswith("NV Power Mode: MAXN"), r.stderr
    finally:
        edgelab(env, "sim", "down", check=False)
    assert status is not None
    for pid in (status["ssh"]["pid"], status["adb"]["server_pid"], status["adb"]["emulator_pid"]):
        assert _pid_gone(pid), pid
    assert persona_processes(sim) == []
    devices = json.loads(edgelab(env, "device", "ls", "--json").stdout)
    assert {d["state"] for d in devices if d["virtual"]} == {"offline"}
    assert json.loads(edgelab(env, "sim", "status", "--json").stdout)["running"] is False
    r = edgelab(env, "sim", "ssh-config", check=False)
    assert r.returncode == 1 and "sim up" in r.stderr
