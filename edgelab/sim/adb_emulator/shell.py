"""``shell:``, ``shell,v2,...:`` and ``exec:``: real processes on the lab host, inside the persona.

Each command runs in its own process group. When the host closes the stream
before the command ends (``adb`` interrupted, a transport timing out or
cancelling), the group gets SIGTERM and, two seconds later, SIGKILL.
Shell protocol v2 packets: 1 byte id, 4 byte little-endian length, data.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import struct

from edgelab.sim.adb_emulator.connection import Stream, StreamClosed
from edgelab.sim.adb_emulator.device import DeviceSpec
from edgelab.sim.sweep import LAB_MARK

ID_STDIN, ID_STDOUT, ID_STDERR, ID_EXIT, ID_CLOSE_STDIN, ID_WINDOW_SIZE = range(6)
_V2_HEADER = struct.Struct("<BI")
KILL_GRACE_S = 2.0
STDIN_PIPE_BYTES = 1 << 20
_PENDING: set[asyncio.Task] = set()
LIVE_GROUPS: set[int] = set()  # process groups still running, killed when the emulator exits


def kill_all() -> None:
    """SIGKILL every command still running (the emulator is going away)."""
    for pgid in list(LIVE_GROUPS):
        _kill_group(pgid, signal.SIGKILL)
    LIVE_GROUPS.clear()


def parse_shell_service(service: str) -> tuple[str, set[str], str] | None:
    """``shell,v2,raw:ls`` -> ("shell", {"v2", "raw"}, "ls"); exec:cmd -> ("exec", set(), cmd)."""
    head, sep, command = service.partition(":")
    if not sep:
        return None
    name, *args = head.split(",")
    if name not in ("shell", "exec"):
        return None
    return name, {a for a in args if a}, command


def command_argv(spec: DeviceSpec, command: str) -> tuple[list[str], dict[str, str], str]:
    """The argv, environment and working directory that run ``command`` on the virtual device."""
    inner = ["sh", "-c", command] if command else ["sh"]
    env = dict(os.environ)
    env["EDGELAB_GETPROP_FILE"] = str(spec.getprop_file)
    env["EDGELAB_PERSONA_DIR"] = str(spec.persona_dir)
    env["ANDROID_DATA"] = "/data"
    env["TMPDIR"] = "/data/local/tmp"
    env["HOME"] = "/"
    env["EDGELAB_DIE_WITH_PARENT"] = "1"  # a killed emulator takes its commands along, as adbd does
    env[LAB_MARK] = str(spec.lab_dir)  # how `sim down` finds what this lab started (edgelab.sim.sweep)
    from edgelab.sim.persona_exec import persona_argv

    return persona_argv(spec.persona_dir, inner, device_root=spec.device_root), env, "/"


def _kill_group(pid: int, sig: int) -> bool:
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


async def _terminate(proc: asyncio.subprocess.Process) -> None:
    """TERM the whole process group (also what outlived its leader), KILL it after the grace period."""
    if not _kill_group(proc.pid, signal.SIGTERM):
        return
    loop = asyncio.get_running_loop()
    end = loop.time() + KILL_GRACE_S
    while loop.time() < end and _group_alive(proc.pid):
        await asyncio.sleep(0.05)
    _kill_group(proc.pid, signal.SIGKILL)


def exit_status(returncode: int) -> int:
    """A shell's view of how a process ended: killed by signal N is 128+N."""
    return 128 - returncode if returncode < 0 else returncode & 0xFF


def _widen_stdin(proc: asyncio.subprocess.Process) -> None:
    """A 1 MiB stdin pipe (Linux): adbd feeds a command's stdin through a socketpair whose buffer
    holds several of its packets; a 64 KiB pipe would take each 1 MiB packet in 16 wake-ups."""
    pipe = proc.stdin.get_extra_info("pipe") if proc.stdin is not None else None
    if pipe is None or not hasattr(fcntl, "F_SETPIPE_SZ"):
        return
    try:
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, STDIN_PIPE_BYTES)
    except (OSError, ValueError):
        # above /proc/sys/fs/pipe-max-size, or a command so quick its pipe is already closed:
        # the default pipe works, only slower; the command must still report its exit status
        pass


async def _start(spec: DeviceSpec, command: str, merge_stderr: bool) -> asyncio.subprocess.Process:
    argv, env, cwd = command_argv(spec, command)
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    _widen_stdin(proc)
    return proc


async def _start_or_report(stream: Stream, spec: DeviceSpec, command: str, merge: bool, v2: bool):
    try:
        return await _start(spec, command, merge)
    except OSError as e:
        msg = f"/system/bin/sh: {e}\n".encode()
        if v2:
            await stream.write(_V2_HEADER.pack(ID_STDERR, len(msg)) + msg)
            await stream.write(_V2_HEADER.pack(ID_EXIT, 1) + bytes([127]))
        else:
            await stream.write(msg)
        return None


def _watch_host_close(stream: Stream, proc: asyncio.subprocess.Process) -> None:
    def killer() -> None:
        task = asyncio.get_running_loop().create_task(_terminate(proc))
        _PENDING.add(task)
        task.add_done_callback(_PENDING.discard)
        task.add_done_callback(lambda _t: LIVE_GROUPS.discard(proc.pid))

    stream.on_close(killer)


async def _pump_stdin_raw(stream: Stream, proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin is not None
    try:
        while chunk := await stream.read():
            proc.stdin.write(chunk)
            await proc.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        if not proc.stdin.is_closing():
            proc.stdin.close()


async def _pump_stdin_v2(stream: Stream, proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin is not None
    try:
        while True:
            header = await stream.readexactly(_V2_HEADER.size)
            kind, length = _V2_HEADER.unpack(header)
            if kind == ID_STDIN:  # passed on piece by piece as it arrives: no copy of the whole packet
                while length:
                    data = await stream.read(length)
                    if not data:
                        raise StreamClosed("stream closed inside a stdin packet")
                    length -= len(data)
                    proc.stdin.write(data)
                    await proc.stdin.drain()
                continue
            data = await stream.readexactly(length) if length else b""
            if kind == ID_CLOSE_STDIN:
                proc.stdin.close()
                return
    except (StreamClosed, BrokenPipeError, ConnectionResetError):
        pass
    finally:
        if not proc.stdin.is_closing():
            proc.stdin.close()


async def _pump_out(stream: Stream, reader: asyncio.StreamReader, packet_id: int | None) -> None:
    chunk_max = max(512, stream.conn.max_payload - _V2_HEADER.size)
    while chunk := await reader.read(chunk_max):
        if packet_id is None:
            await stream.write(chunk)
        else:
            await stream.write(_V2_HEADER.pack(packet_id, len(chunk)) + chunk)


async def serve_shell(stream: Stream, spec: DeviceSpec) -> None:
    parsed = parse_shell_service(stream.service)
    assert parsed is not None
    name, args, command = parsed
    v2 = name == "shell" and "v2" in args
    proc = await _start_or_report(stream, spec, command, merge=not v2, v2=v2)
    if proc is None:
        return
    LIVE_GROUPS.add(proc.pid)
    _watch_host_close(stream, proc)
    stdin_task = asyncio.create_task(_pump_stdin_v2(stream, proc) if v2 else _pump_stdin_raw(stream, proc))
    try:
        outputs = [_pump_out(stream, proc.stdout, ID_STDOUT if v2 else None)]
        if v2:
            outputs.append(_pump_out(stream, proc.stderr, ID_STDERR))
        await asyncio.gather(*outputs)
        code = exit_status(await proc.wait())
        if v2:
            await stream.write(_V2_HEADER.pack(ID_EXIT, 1) + bytes([code]))
    except StreamClosed:
        await _terminate(proc)
        raise
    finally:
        stdin_task.cancel()
        if proc.returncode is None:
            await _terminate(proc)
        if not stream.closed:
            LIVE_GROUPS.discard(proc.pid)  # still tracked when the host hung up: its killer runs
