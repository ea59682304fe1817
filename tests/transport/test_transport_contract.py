"""One contract, every transport: local, ssh (real sshd) and adb (real adb server) behave alike.

The ssh and adb transports run against the virtual lab's real servers; the
remote side of each test is a real process whose fate is checked afterwards. ``win_ps`` and
``win_cmd`` are the two Windows personas (OpenSSH DefaultShell powershell.exe, and its default
cmd.exe): every argv crosses their PowerShell/cmd.exe shims, and timeouts and cancels kill by
``taskkill /T``; the commands themselves are the lab host's programs, which a virtual Windows
device runs as its native programs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgelab.errors import RemoteTimeout
from edgelab.transport.base import Transport

KINDS = ["local", "ssh", "adb", "win_ps", "win_cmd"]


WINDOWS = ("win_ps", "win_cmd")


# Each kind's transport is requested at run time, so its lane is declared here (tests/conftest.py).
LANES = {
    "ssh": pytest.mark.ssh,
    "adb": pytest.mark.adb,
    "win_ps": pytest.mark.ssh,
    "win_cmd": pytest.mark.ssh,
}


@pytest.fixture(params=[pytest.param(k, marks=LANES[k]) if k in LANES else k for k in KINDS])
def transport(request) -> Transport:
    t = request.getfixturevalue(f"{request.param}_transport")
    t.contract_kind = request.param
    return t


def native(transport: Transport, name: str) -> str:
    """On a Windows device ``cat``, ``kill``, ``rm`` are PowerShell aliases (Get-Content, Stop-Process,
    Remove-Item): the lab host's program is named by its path there, as a Windows user would."""
    if getattr(transport, "contract_kind", "") in WINDOWS:
        return shutil.which(name) or name
    return name


@pytest.fixture
def remote_dir(transport: Transport):
    """A fresh writable directory on the device, removed afterwards."""
    base = "/data/local/tmp" if transport.kind == "adb" else "/tmp"
    path = f"{base}/edgelab-contract-{uuid.uuid4().hex[:10]}"
    assert transport.run(["mkdir", "-p", path], timeout=30).ok
    yield path
    transport.run([native(transport, "rm"), "-rf", path], timeout=30)


def _alive(transport: Transport, pid: int) -> bool:
    return transport.run([native(transport, "kill"), "-0", str(pid)], timeout=30).exit_code == 0


def _wait_gone(transport: Transport, pid: int, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _alive(transport, pid):
            return True
        time.sleep(0.1)
    return False


def _read_pid(transport: Transport, path: str, seconds: float = 10.0) -> int:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r = transport.run([native(transport, "cat"), path], timeout=30)
        if r.ok and r.stdout.strip().isdigit():
            return int(r.stdout.strip())
        time.sleep(0.05)
    raise AssertionError(f"no pid file at {path}")


def test_run_keeps_stdout_stderr_and_exit_code_apart(transport: Transport) -> None:
    r = transport.run(["sh", "-c", "echo out; echo err >&2; exit 7"], timeout=30)
    assert (r.exit_code, r.stdout, r.stderr) == (7, "out\n", "err\n")
    assert not r.ok


def test_run_success_and_missing_command(transport: Transport) -> None:
    assert transport.run(["true"], timeout=30).ok
    missing = transport.run(["edgelab-no-such-command-xyz"], timeout=30)
    # 127 from a POSIX shell; PowerShell's CommandNotFoundException makes powershell exit 1
    assert missing.exit_code == (1 if getattr(transport, "contract_kind", "") in WINDOWS else 127)


def test_run_passes_stdin(transport: Transport) -> None:
    r = transport.run([native(transport, "cat")], timeout=30, input=b"hello\nworld\n")
    assert r.stdout == "hello\nworld\n"


def test_run_timeout_kills_the_remote_process(transport: Transport, remote_dir: str) -> None:
    pidfile = f"{remote_dir}/pid"
    start = time.monotonic()
    with pytest.raises(RemoteTimeout):
        transport.run(["sh", "-c", f"echo $$ > {pidfile}; exec sleep 300"], timeout=1.5)
    assert time.monotonic() - start < 120, "the timeout did not interrupt the call"
    pid = _read_pid(transport, pidfile)
    assert _wait_gone(transport, pid), f"remote pid {pid} survived the timeout"


def test_stream_yields_lines_as_they_arrive(transport: Transport) -> None:
    proc = transport.stream(["sh", "-c", "echo one; echo two; exit 3"])
    assert list(proc.lines()) == ["one", "two"]
    assert proc.wait(timeout=30) == 3


def test_stream_first_line_before_process_ends(transport: Transport, remote_dir: str) -> None:
    """The first line is readable while the remote process still runs (no buffering to the end)."""
    pidfile = f"{remote_dir}/pid"
    proc = transport.stream(["sh", "-c", f"echo $$ > {pidfile}; echo ready; exec sleep 300"])
    try:
        lines = proc.lines()
        assert next(lines) == "ready"
        pid = _read_pid(transport, pidfile)
        assert _alive(transport, pid)
    finally:
        proc.cancel()
    assert _wait_gone(transport, pid)


def test_stream_cancel_kills_the_whole_process_group(transport: Transport, remote_dir: str) -> None:
    leader_file, child_file = f"{remote_dir}/leader", f"{remote_dir}/child"
    script = f"echo $$ > {leader_file}; sleep 300 & echo $! > {child_file}; echo started; wait"
    proc = transport.stream(["sh", "-c", script])
    lines = proc.lines()
    assert next(lines) == "started"
    leader, child = _read_pid(transport, leader_file), _read_pid(transport, child_file)
    proc.cancel()
    proc.cancel()  # twice is harmless
    assert _wait_gone(transport, leader), "the stream's process survived cancel"
    assert _wait_gone(transport, child), "a child in the stream's process group survived cancel"


def test_put_get_round_trip_with_sha256(transport: Transport, remote_dir: str, tmp_path: Path) -> None:
    data = os.urandom(20 * 1024 * 1024 + 123)  # 20 MB and an odd tail
    src = tmp_path / "blob in.bin"
    src.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    remote = f"{remote_dir}/sub dir/it's a $(blob).bin"
    seen: list[tuple[int, int]] = []
    assert transport.put(src, remote, progress=lambda done, total: seen.append((done, total))) == digest
    assert seen and seen[-1] == (len(data), len(data))
    r = transport.run(["sha256sum", remote], timeout=60)
    assert r.ok, r.stderr
    assert r.stdout.split()[0] == digest
    back = tmp_path / "back.bin"
    assert transport.get(remote, back) == digest
    assert back.read_bytes() == data


def test_put_empty_file(transport: Transport, remote_dir: str, tmp_path: Path) -> None:
    src = tmp_path / "empty"
    src.write_bytes(b"")
    assert transport.put(src, f"{remote_dir}/empty") == hashlib.sha256(b"").hexdigest()
    assert transport.run(["wc", "-c", f"{remote_dir}/empty"], timeout=30).stdout.split()[0] == "0"


arg_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=30,
)
NASTY = ["a b", "it's", '"q"', "$(id)", "`id`", "a;b", "*", "?", "[a]", "x\ny", "\\", "~", "-n", "$HOME"]


def test_nasty_arguments_reach_the_device_exactly(transport: Transport) -> None:
    r = transport.run(["printf", "%s\\0", *NASTY], timeout=30)
    assert r.stdout.split("\0")[:-1] == NASTY


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(arg_text, min_size=1, max_size=4))
def test_any_arguments_reach_the_device_exactly(transport: Transport, args: list[str]) -> None:
    r = transport.run(["printf", "%s\\0", *args], timeout=30)
    assert r.ok, r.stderr
    assert r.stdout.split("\0")[:-1] == args


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/"),
        min_size=1,
        max_size=20,
    ).filter(lambda n: n not in (".", ".."))
)
def test_any_file_name_reaches_the_device_exactly(
    transport: Transport, remote_dir: str, tmp_path_factory, name: str
) -> None:
    src = tmp_path_factory.mktemp("names") / "payload"
    src.write_bytes(name.encode("utf-8"))
    transport.put(src, f"{remote_dir}/{name}")
    r = transport.run([native(transport, "cat"), f"{remote_dir}/{name}"], timeout=30)
    assert r.ok, r.stderr
    assert r.stdout == name
    transport.run([native(transport, "rm"), "-f", f"{remote_dir}/{name}"], timeout=30)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str, timeout: float = 5.0) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:  # noqa: S310 - loopback
        return r.read().decode()


def test_forward_reaches_a_server_on_the_device_loopback(transport: Transport, remote_dir: str) -> None:
    """forward(remote_port) -> a lab-side port; every connection through it reaches the device's server."""
    token = uuid.uuid4().hex
    assert transport.run(
        ["sh", "-c", 'printf %s "$1" > "$2/hello.txt"', "x", token, remote_dir], timeout=30
    ).ok
    port = _free_port()
    server = transport.stream(
        ["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", remote_dir]
    )
    try:
        with transport.forward(port) as fw:
            assert fw.remote_port == port and fw.local_port > 0
            end, got = time.monotonic() + 30, None
            while time.monotonic() < end and got is None:
                try:
                    got = _get(fw.local_port, "/hello.txt")
                except OSError:
                    time.sleep(0.2)
            assert got == token
            assert _get(fw.local_port, "/hello.txt") == token  # a second connection through the same forward
            missing = None
            try:
                _get(fw.local_port, "/nothing-here")
            except OSError as e:
                missing = e
            assert missing is not None and "404" in str(missing)
        if transport.kind != "local":  # local forwards are the server's own port: nothing to tear down
            with pytest.raises(OSError):
                _get(fw.local_port, "/hello.txt", timeout=3)
    finally:
        server.cancel()
