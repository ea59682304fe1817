"""The real adb CLI against the emulator: what an operator types must work on a virtual device."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from fixtures.adb_lab import adb_endpoint

from edgelab.errors import DeviceStateError
from edgelab.sim.adb_lab import AdbLabInfo
from edgelab.transport.adb import ADBTransport, list_adb_devices
from edgelab.transport.base import Endpoint

pytestmark = pytest.mark.adb


def adb(
    lab: AdbLabInfo, *args: str, serial: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    port = lab.adb_server.rsplit(":", 1)[1]
    env = dict(os.environ, HOME=str(lab.state_dir / "adb" / "home"))
    cmd = [lab.adb_path, "-P", port] + (["-s", serial] if serial else []) + list(args)
    return subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)


def test_adb_devices_lists_every_persona_and_the_locked_one(adb_lab: AdbLabInfo) -> None:
    out = adb(adb_lab, "devices").stdout.decode()
    states = dict(line.split("\t") for line in out.splitlines()[1:] if "\t" in line)
    for name in ("s25", "s24", "rb3g2", "sa8775p"):
        assert states[adb_lab.device(name).serial] == "device"
    assert states[adb_lab.device("s24-locked").serial] == "unauthorized"
    assert dict(list_adb_devices(adb_lab.adb_server)) == states


def test_adb_shell_v2_exit_code_and_separate_stderr(adb_lab: AdbLabInfo) -> None:
    r = adb(adb_lab, "shell", "echo out; echo err >&2; exit 42", serial=adb_lab.device("s25").serial)
    assert (r.returncode, r.stdout, r.stderr) == (42, b"out\n", b"err\n")


def test_adb_exec_out_is_raw_binary(adb_lab: AdbLabInfo) -> None:
    r = adb(adb_lab, "exec-out", "printf '\\000\\001\\377\\n'", serial=adb_lab.device("s25").serial)
    assert r.returncode == 0 and r.stdout == b"\x00\x01\xff\n"


@pytest.mark.parametrize(
    ("name", "model", "soc", "platform"),
    [
        ("s25", "SM-S931B", "SM8750", "sun"),
        ("s24", "SM-S921U", "SM8650", "pineapple"),
        ("rb3g2", "QCS6490 RB3 Gen 2", "QCS6490", "kodiak"),
        ("sa8775p", "SA8775P ADP", "SA8775P", "lemans"),
    ],
)
def test_getprop_answers_from_the_persona(adb_lab: AdbLabInfo, name, model, soc, platform) -> None:
    serial = adb_lab.device(name).serial
    r = adb(
        adb_lab,
        "shell",
        "getprop ro.product.model; getprop ro.soc.model; getprop ro.board.platform",
        serial=serial,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == [model, soc, platform]
    everything = adb(adb_lab, "shell", "getprop", serial=serial).stdout.decode()
    assert f"[ro.product.model]: [{model}]" in everything.splitlines()
    assert (
        f"model:{model.replace(' ', '_').replace('-', '_')}" in adb(adb_lab, "devices", "-l").stdout.decode()
    )


def test_push_pull_20mb_byte_exact(adb_lab: AdbLabInfo, tmp_path: Path) -> None:
    serial = adb_lab.device("s24").serial
    data = os.urandom(20 * 1024 * 1024 + 7)
    src, back = tmp_path / "blob.bin", tmp_path / "back.bin"
    src.write_bytes(data)
    remote = "/data/local/tmp/adb cli/blob.bin"
    assert adb(adb_lab, "push", str(src), remote, serial=serial).returncode == 0
    on_device = adb(adb_lab, "shell", f"sha256sum '{remote}'", serial=serial).stdout.decode().split()[0]
    assert on_device == hashlib.sha256(data).hexdigest()
    assert adb(adb_lab, "pull", remote, str(back), serial=serial).returncode == 0
    assert back.read_bytes() == data
    ls = adb(adb_lab, "shell", "ls -l '/data/local/tmp/adb cli'", serial=serial).stdout.decode()
    assert str(len(data)) in ls
    adb(adb_lab, "shell", "rm -rf '/data/local/tmp/adb cli'", serial=serial)


def test_sync_stays_inside_the_device(adb_lab: AdbLabInfo, tmp_path: Path) -> None:
    serial = adb_lab.device("s25").serial
    (tmp_path / "x").write_text("x")
    escape = adb(adb_lab, "push", str(tmp_path / "x"), "/data/../../tmp/edgelab-escape", serial=serial)
    assert escape.returncode != 0
    assert not Path("/tmp/edgelab-escape").exists()
    # the lab host's own files are not on the device; the persona's are
    assert adb(adb_lab, "pull", "/etc/hostname", str(tmp_path / "h"), serial=serial).returncode != 0
    assert (
        adb(adb_lab, "pull", "/vendor/lib64/libQnnHtp.so", str(tmp_path / "q"), serial=serial).returncode == 0
    )


def test_closing_the_shell_kills_the_command(adb_lab: AdbLabInfo, adb_transport: ADBTransport) -> None:
    serial = adb_lab.device("s25").serial
    port = adb_lab.adb_server.rsplit(":", 1)[1]
    env = dict(os.environ, HOME=str(adb_lab.state_dir / "adb" / "home"))
    pidfile = "/data/local/tmp/edgelab-hup.pid"
    proc = subprocess.Popen(
        [
            adb_lab.adb_path,
            "-P",
            port,
            "-s",
            serial,
            "shell",
            f"echo $$ > {pidfile}; echo up; exec sleep 300",
        ],
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout.readline() == b"up\n"
        pid = int(adb_transport.run(["cat", pidfile]).stdout)
        assert adb_transport.run(["kill", "-0", str(pid)]).ok
    finally:
        proc.kill()  # the adb client dies, the server closes the stream, the device ends the command
        proc.wait()
    for _ in range(100):
        if not adb_transport.run(["kill", "-0", str(pid)]).ok:
            break
    else:
        pytest.fail("the command outlived its adb shell")


def test_unauthorized_device_is_refused_with_a_remedy(adb_lab: AdbLabInfo) -> None:
    ep = adb_endpoint(adb_lab, "s24-locked")
    with pytest.raises(DeviceStateError) as err:
        ADBTransport.connect(ep)
    assert "unauthorized" in str(err.value)
    assert "USB debugging" in (err.value.remedy or "")
    assert ADBTransport.check(ep)[0] == "unauthorized"


def test_check_states(adb_lab: AdbLabInfo) -> None:
    assert ADBTransport.check(adb_endpoint(adb_lab, "rb3g2"))[0] == "online"
    absent = Endpoint(name="ghost", kind="adb", adb_serial="127.0.0.1:1", adb_server=adb_lab.adb_server)
    assert ADBTransport.check(absent)[0] == "absent"
    with pytest.raises(DeviceStateError):
        ADBTransport.connect(absent)
    port = adb_lab.adb_server.rsplit(":", 1)[1]
    nobody = Endpoint(name="x", kind="adb", adb_serial="127.0.0.1:1", adb_server=f"127.0.0.2:{port}")
    state, detail = ADBTransport.check(nobody, timeout=2)
    assert state == "offline" and "no adb server" in (detail or "")


def test_persona_facts_on_the_device(adb_transport: ADBTransport) -> None:
    r = adb_transport.run(["cat", "/sys/devices/system/cpu/cpu7/cpufreq/cpuinfo_max_freq"])
    assert r.stdout.strip() == "4473600"
    r = adb_transport.run(["dumpsys", "battery"])
    assert r.ok and "level: 100" in r.stdout
    assert adb_transport.run(["ls", "/vendor/lib64/libOpenCL.so"]).ok
    meminfo = adb_transport.run(["cat", "/proc/meminfo"]).stdout
    assert meminfo.splitlines()[0].split() == ["MemTotal:", "11230212", "kB"]
    cpuinfo = adb_transport.run(["cat", "/proc/cpuinfo"]).stdout  # the real Galaxy S25+ capture
    assert cpuinfo.count("CPU part\t: 0x001") == 8
