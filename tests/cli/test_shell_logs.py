"""`edgelab shell` and `edgelab device logs` over the virtual lab's real sshd and adb server."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.inventory.console import log_argv
from edgelab.lease import acquire
from edgelab.lease.owner import Holder
from edgelab.sim.lab import LabStatus, register
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine
from edgelab.transport.quoting import Shell

pytestmark = [pytest.mark.ssh, pytest.mark.adb]
runner = CliRunner()


@pytest.fixture(scope="module")
def lab_db(tmp_path_factory, ssh_lab, adb_lab):
    url = f"sqlite:///{tmp_path_factory.mktemp('shell') / 'lab.db'}"
    register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=adb_lab), check=False)
    env = {**os.environ, "EDGELAB_DB": url, "EDGELAB_SIM_DIR": str(ssh_lab.state_dir), "COLUMNS": "300"}
    env.pop("EDGELAB_LEASE", None)
    yield url, env
    dbmod.dispose_engines()


@pytest.mark.parametrize("device", ["orin-agx", "s25"])
def test_one_command_prints_its_output_and_exits_with_its_code(lab_db, device):
    url, env = lab_db
    out = runner.invoke(
        app,
        ["--db", url, "shell", device, "--", "sh", "-c", "echo out-$((6*7)); echo err >&2; exit 3"],
        env=env,
    )
    assert out.exit_code == 3, out.output
    assert "out-42" in out.stdout and "err" in out.output
    ok = runner.invoke(app, ["--db", url, "shell", device, "--", "echo", "a b;c"], env=env)  # quoted exactly
    assert ok.exit_code == 0 and ok.stdout.strip() == "a b;c"


def test_shell_on_a_device_someone_else_holds_is_refused_naming_the_holder(lab_db):
    url, env = lab_db
    lease = acquire(get_engine(url), names=["s24"], ttl_s=300, holder=Holder("alice@lab1"))
    out = runner.invoke(
        app, ["--db", url, "shell", "s24", "--", "true"], env={**env, "EDGELAB_OWNER": "bob@lab2"}
    )
    assert out.exit_code == 1 and "alice@lab1" in out.output and lease.id in out.output


def test_no_command_without_a_terminal_is_a_usage_error(lab_db):
    url, env = lab_db
    out = runner.invoke(app, ["--db", url, "shell", "s25"], env=env, input="")
    assert out.exit_code == 2 and "--" in out.output


@pytest.mark.parametrize("device", ["orin-agx", "s25"])
def test_interactive_shell_on_a_terminal(lab_db, device):
    url, env = lab_db
    master, slave = pty.openpty()
    exe = os.path.join(os.path.dirname(sys.executable), "edgelab")
    proc = subprocess.Popen(
        [exe, "shell", device], stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    out = b""
    try:
        os.write(master, b"echo hi-$((40+2))\n")
        deadline = time.monotonic() + 60
        sent_exit = False
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 4096)
                except OSError:
                    break
                if not data:
                    break
                out += data
            if b"hi-42" in out and not sent_exit:
                os.write(master, b"exit\n")
                sent_exit = True
            if proc.poll() is not None and not ready:
                break
        assert proc.wait(timeout=30) == 0, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert b"hi-42" in out


def test_device_logs_per_family(lab_db):
    url, env = lab_db
    phone = runner.invoke(app, ["--db", url, "device", "logs", "s25", "-n", "20"], env=env)
    assert phone.exit_code == 0 and "virtual device" in phone.stdout  # the emulator's logcat says what it is
    jetson = runner.invoke(app, ["--db", url, "device", "logs", "orin-agx", "-n", "5"], env=env)
    # the journal (or dmesg) of the lab host the persona runs on: whatever it says, or a one-line error
    assert jetson.exit_code in (0, 1) and "Traceback" not in jetson.output
    assert log_argv(Shell.TOYBOX, lines=50) == ["logcat", "-d", "-t", "50"]
    assert log_argv(Shell.TOYBOX, lines=50, follow=True) == ["logcat", "-T", "50"]
    assert "journalctl --no-pager -n 7 -f" in log_argv(Shell.POSIX, lines=7, follow=True)[2]
    win = log_argv(Shell.POWERSHELL, lines=9)
    assert win[:4] == ["powershell", "-NoProfile", "-NonInteractive", "-EncodedCommand"]


@pytest.mark.parametrize("device,local", [("orin-agx", True), ("s25", False)])
def test_forward_reaches_a_port_on_the_device(lab_db, device, local):
    import signal
    import socket
    import threading

    from edgelab.sim.adb_lab import free_port

    url, env = lab_db
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))  # the virtual device's loopback is the lab host's
    srv.listen(4)
    port = srv.getsockname()[1]

    def echo() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.sendall(b"echo:" + conn.recv(100))

    threading.Thread(target=echo, daemon=True).start()
    exe = os.path.join(os.path.dirname(sys.executable), "edgelab")
    args = [exe, "forward", device, str(port)] + (["--local", str(free_port(None))] if local else [])
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("forwarding 127.0.0.1:"), (line, proc.stderr.read() if proc.poll() else "")
        lab_port = int(line.split()[1].rsplit(":", 1)[1])
        if local:
            assert lab_port == int(args[-1])
        with socket.create_connection(("127.0.0.1", lab_port), timeout=30) as c:
            c.sendall(b"ping")
            assert c.recv(100) == b"echo:ping"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        srv.close()


@pytest.mark.parametrize("device", ["win-hx370-rtx5090", "xelite-pc"])  # DefaultShell powershell, cmd
def test_device_logs_on_windows_reads_the_system_event_log(lab_db, device):
    url, env = lab_db
    out = runner.invoke(app, ["--db", url, "device", "logs", device, "-n", "3"], env=env)
    assert out.exit_code == 0, out.output
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 3, lines  # the newest three, oldest first, one line each (the CRLF message folded)
    assert lines[0].startswith("2026-11-30 08:00:09 7036 Information Service Control Manager: The OpenSSH")
    assert lines[1].startswith("2026-11-30 08:00:12 10016 Warning Microsoft-Windows-DistributedCOM:")
    assert "permission for the COM" in lines[1]
    assert "edgelab virtual device" in lines[2]


def test_device_logs_follow_on_windows_shows_new_events(lab_db, ssh_lab):
    import json

    url, env = lab_db
    exe = os.path.join(os.path.dirname(sys.executable), "edgelab")
    log = ssh_lab.state_dir / "ssh" / "personas" / "win-hx370-rtx5090" / "data" / "eventlog" / "System.json"
    before = log.read_text()
    proc = subprocess.Popen(
        [exe, "device", "logs", "win-hx370-rtx5090", "-n", "1", "-f"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        first = proc.stdout.readline()
        assert "edgelab virtual device" in first, (first, proc.poll())
        records = json.loads(before)
        records.append(
            {
                "RecordId": 9001,
                "TimeCreated": "2026-12-01T10:00:00Z",
                "Id": 7040,
                "Level": 4,
                "ProviderName": "Service Control Manager",
                "Message": "follow-marker written later",
            }
        )
        log.write_text(json.dumps(records))
        line = proc.stdout.readline()
        assert line.startswith(
            "2026-12-01 10:00:00 7040 Information Service Control Manager: follow-marker"
        ), line
    finally:
        log.write_text(before)
        proc.send_signal(2)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
