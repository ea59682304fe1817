"""Lifecycle of the virtual ADB lab: idempotent start, recovery of a restarted emulator, clean stop."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from fixtures.adb_lab import adb_endpoint

from edgelab.sim.adb_emulator.protocol import A_CNXN, Message, encode, parse_banner
from edgelab.sim.adb_emulator.shell import exit_status, parse_shell_service
from edgelab.sim.adb_lab import adb_lab_status, free_port, start_adb_lab, stop_adb_lab
from edgelab.transport.adb import ADBTransport


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone(pid: int, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.adb
def test_lab_lifecycle_leaves_no_process(tmp_path: Path) -> None:
    state = tmp_path / "lab"
    try:
        info = start_adb_lab(state, ["rb3g2"], base_port=free_port(None))
        assert [(d.name, d.state, d.device_class) for d in info.devices] == [("rb3g2", "device", "npu_phone")]
        assert all(int(d.serial.rsplit(":", 1)[1]) >= 5586 for d in info.devices)
        assert info.adb_server != "127.0.0.1:5037"

        again = start_adb_lab(state, ["rb3g2"])
        assert (again.server_pid, again.emulator_pid) == (info.server_pid, info.emulator_pid)

        # a command left running on the device must die with the lab
        t = ADBTransport.connect(adb_endpoint(info, "rb3g2"))
        p = t.stream(["sleep", "300"])
        for _ in range(100):
            if p.pid is not None:
                break
            time.sleep(0.05)
        device_pid = p.pid
        assert device_pid is not None and _alive(device_pid)

        # the emulator dies; start brings it back and the device online again
        os.kill(info.emulator_pid, signal.SIGKILL)
        assert _gone(info.emulator_pid)
        os.kill(device_pid, signal.SIGKILL)  # what SIGKILL of the emulator could not clean up
        revived = start_adb_lab(state, ["rb3g2"])
        assert revived.server_pid == info.server_pid and revived.emulator_pid != info.emulator_pid
        assert revived.device("rb3g2").state == "device"
        assert (
            ADBTransport.connect(adb_endpoint(revived, "rb3g2")).run(["getprop", "ro.soc.model"]).stdout
            == "QCS6490\n"
        )

        p2 = ADBTransport.connect(adb_endpoint(revived, "rb3g2")).stream(["sleep", "300"])
        for _ in range(100):
            if p2.pid is not None:
                break
            time.sleep(0.05)
        assert p2.pid is not None and _alive(p2.pid)
    finally:
        stop_adb_lab(state)
    assert adb_lab_status(state) is None
    for pid in (info.server_pid, info.emulator_pid, revived.emulator_pid, p2.pid):
        assert _gone(pid), f"process {pid} outlived stop_adb_lab"


def test_banner_and_framing() -> None:
    payload = b"device::ro.product.model=SM-S931B;features=shell_v2,cmd"
    raw = encode(Message(A_CNXN, 0x01000001, 4096, payload))
    assert len(raw) == 24 + len(payload) and raw[:4] == b"CNXN"
    assert int.from_bytes(raw[12:16], "little") == len(payload)
    kind, props, features = parse_banner(raw[24:])
    assert (kind, props, features) == ("device", {"ro.product.model": "SM-S931B"}, {"shell_v2", "cmd"})
    assert int.from_bytes(raw[16:20], "little") == sum(raw[24:])  # checksum computed when sending


def test_shell_service_names() -> None:
    assert parse_shell_service("shell,v2,TERM=xterm,raw:ls -l") == (
        "shell",
        {"v2", "TERM=xterm", "raw"},
        "ls -l",
    )
    assert parse_shell_service("shell:") == ("shell", set(), "")
    assert parse_shell_service("exec:cat /x") == ("exec", set(), "cat /x")
    assert parse_shell_service("sync:") is None
    assert exit_status(-15) == 143 and exit_status(3) == 3


def test_a_command_gone_before_its_stdin_is_widened_still_gets_its_exit_status() -> None:
    """The emulator widens a command's stdin pipe right after starting it. A command quick enough
    to be reaped first has that pipe closed already; the widening raised ValueError there, the
    service died without its exit packet, and ``device check --all`` saw "the shell ended without
    an exit status" in about 1 run of 5 (emulator log: ``I/O operation on closed file``)."""
    import asyncio

    from edgelab.sim.adb_emulator.shell import _widen_stdin

    async def scenario() -> int:
        proc = await asyncio.create_subprocess_exec(
            "true", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL
        )
        assert proc.stdin is not None
        await proc.wait()
        proc.stdin.get_extra_info("pipe").close()  # what the loop does once it reaped the child
        _widen_stdin(proc)  # must not raise: the command's status still has to be sent
        return proc.returncode

    assert asyncio.run(scenario()) == 0
