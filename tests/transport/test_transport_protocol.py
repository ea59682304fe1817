"""The transport protocol itself: resumable put, declared capabilities, one options record per transport.

Resumed puts run against the real lab (sshd's sftp-server, the adb server in front of edgelab's
emulator) and the lab host; a resumed file is checked byte for byte by reading it back.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

import pytest

from edgelab.errors import ConfigError, TransportError
from edgelab.transport import (
    Capability,
    Endpoint,
    Transport,
    check,
    open_transport,
    options_for,
    transport_class,
)
from edgelab.transport.options import ADBOptions, LocalOptions, SSHOptions
from edgelab.transport.quoting import Shell

SIZE = 3 * (1 << 20) + 12345  # more than one copy chunk, not a multiple of one


# Marked on the params, so `-m "not ssh and not adb"` deselects them before any lab starts
# (tests/conftest.py: a mark applied at run time comes too late for the lanes).
@pytest.fixture(
    params=["local", pytest.param("ssh", marks=pytest.mark.ssh), pytest.param("adb", marks=pytest.mark.adb)]
)
def transport(request) -> Transport:
    return request.getfixturevalue(f"{request.param}_transport")


@pytest.fixture
def remote_dir(transport: Transport):
    base = "/data/local/tmp" if transport.shell is Shell.TOYBOX else "/tmp"
    path = f"{base}/edgelab-protocol-{uuid.uuid4().hex[:10]}"
    assert transport.run(["mkdir", "-p", path], timeout=30).ok
    yield path
    transport.run(["rm", "-rf", path], timeout=30)


@pytest.fixture
def blob(tmp_path: Path) -> Path:
    path = tmp_path / "blob.bin"
    path.write_bytes(os.urandom(SIZE))
    return path


def _read_back(t: Transport, remote: str, tmp_path: Path) -> bytes:
    back = tmp_path / f"back-{uuid.uuid4().hex[:6]}"
    t.get(remote, back)
    return back.read_bytes()


def test_whole_put_returns_the_digest_and_leaves_no_part(
    transport: Transport, remote_dir: str, blob: Path, tmp_path: Path
) -> None:
    seen: list[tuple[int, int]] = []
    digest = transport.put(blob, f"{remote_dir}/whole", progress=lambda d, t: seen.append((d, t)))
    assert digest == hashlib.sha256(blob.read_bytes()).hexdigest()
    assert seen[-1] == (SIZE, SIZE)
    assert _read_back(transport, f"{remote_dir}/whole", tmp_path) == blob.read_bytes()
    listing = transport.run(["ls", remote_dir], timeout=30).stdout.split()
    assert listing == ["whole"]


def test_resumed_put_continues_in_place(
    transport: Transport, remote_dir: str, blob: Path, tmp_path: Path
) -> None:
    """A cut upload left a prefix (and junk past it); put(offset) writes the rest into that same file."""
    if not transport.supports(Capability.RESUMABLE_PUT):
        with pytest.raises(TransportError, match="cannot resume an upload"):
            transport.put(blob, f"{remote_dir}/part", offset=0)
        return
    data = blob.read_bytes()
    cut = 1_000_003
    leftover = tmp_path / "leftover"
    leftover.write_bytes(data[:cut] + b"junk that a cut write left beyond the resume point")
    transport.put(leftover, f"{remote_dir}/part")
    seen: list[tuple[int, int]] = []
    assert (
        transport.put(blob, f"{remote_dir}/part", offset=cut, progress=lambda d, t: seen.append((d, t)))
        is None
    )
    assert seen and seen[0][0] > cut and seen[-1] == (SIZE, SIZE)
    assert all(t == SIZE for _, t in seen)
    assert _read_back(transport, f"{remote_dir}/part", tmp_path) == data


def test_resumed_put_from_zero_writes_the_file_itself(
    transport: Transport, remote_dir: str, blob: Path, tmp_path: Path
) -> None:
    if not transport.supports(Capability.RESUMABLE_PUT):
        pytest.skip(f"{transport.kind} does not declare RESUMABLE_PUT")
    remote = f"{remote_dir}/sub/dir/fresh.part"
    transport.put(blob, remote, offset=0)
    assert _read_back(transport, remote, tmp_path) == blob.read_bytes()
    assert transport.run(["ls", f"{remote_dir}/sub/dir"], timeout=30).stdout.split() == ["fresh.part"]


def test_resume_refuses_an_offset_past_the_end_or_a_missing_file(
    transport: Transport, remote_dir: str, blob: Path
) -> None:
    if not transport.supports(Capability.RESUMABLE_PUT):
        pytest.skip(f"{transport.kind} does not declare RESUMABLE_PUT")
    with pytest.raises(TransportError, match="only"):
        transport.put(blob, f"{remote_dir}/x", offset=SIZE + 1)
    with pytest.raises(TransportError, match="resume"):
        transport.put(blob, f"{remote_dir}/not-there", offset=10)
    with pytest.raises(ValueError):
        transport.put(blob, f"{remote_dir}/x", offset=-1)


def test_declared_capabilities_match_what_the_methods_do(transport: Transport) -> None:
    """A method behind an undeclared capability refuses with a TransportError; a declared one works."""
    for cap in (Capability.FORWARD, Capability.PROCESS_GROUPS):
        assert transport.supports(cap), f"{transport.kind} lost {cap}"
    if transport.supports(Capability.WINDOWS_SHELL):
        assert type(transport).run_ps is not Transport.run_ps
    else:
        with pytest.raises(TransportError, match="cannot run PowerShell"):
            transport.run_ps("exit 0")
        with pytest.raises(TransportError, match="cannot run PowerShell"):
            transport.stream_ps("exit 0")
    if not transport.supports(Capability.INTERACTIVE):
        with pytest.raises(TransportError, match="interactive"):
            transport.interactive(term="xterm", columns=80, lines=24)
    assert transport_class(transport.kind) is type(transport)
    assert transport_class(transport.kind).supports(Capability.FORWARD)


def test_capabilities_are_declared_per_class() -> None:
    from edgelab.transport.adb import ADBTransport
    from edgelab.transport.local import LocalTransport
    from edgelab.transport.ssh import SSHTransport

    assert SSHTransport.supports(Capability.WINDOWS_SHELL | Capability.INTERACTIVE | Capability.RESUMABLE_PUT)
    assert ADBTransport.supports(Capability.INTERACTIVE)
    assert not ADBTransport.supports(Capability.WINDOWS_SHELL)
    assert not LocalTransport.supports(Capability.WINDOWS_SHELL)
    assert not LocalTransport.supports(Capability.INTERACTIVE)
    assert LocalTransport.supports(Capability.RESUMABLE_PUT)


def test_options_are_one_typed_record_per_transport() -> None:
    ssh = Endpoint("a", "ssh", ssh_host="h")
    adb = Endpoint("p", "adb", adb_serial="s")
    local = Endpoint("l", "local")
    knobs = {"timeout": 15.0, "ssh_config": "/x/config", "known_hosts": None}
    assert options_for(ssh, **knobs) == SSHOptions(timeout=15.0, ssh_config="/x/config")
    assert options_for(adb, **knobs) == ADBOptions(timeout=15.0)
    assert options_for(local, **knobs) == LocalOptions(timeout=15.0)
    assert options_for(ssh, **knobs).kwargs() == {"timeout": 15.0, "ssh_config": "/x/config"}
    assert options_for(adb, **knobs).kwargs() == {"timeout": 15.0}
    assert options_for(local, **knobs).kwargs() == {}
    assert options_for(ssh).kwargs() == {}
    with pytest.raises(ConfigError, match="unknown transport option"):
        options_for(ssh, timout=3)
    with pytest.raises(ConfigError, match="unknown transport kind"):
        options_for(Endpoint("z", "serial"))


def test_open_and_check_take_every_knob_for_every_kind(tmp_path: Path) -> None:
    """Callers pass their knobs without looking at the kind; the ones that do not apply are dropped."""
    local = Endpoint("l", "local")
    with open_transport(local, timeout=2.0, ssh_config=str(tmp_path / "none")) as t:
        assert t.run(["true"]).ok
    assert check(local, timeout=2.0, ssh_config=str(tmp_path / "none")) == ("online", None)


@pytest.mark.ssh
def test_check_and_open_over_ssh_with_the_labs_knobs(ssh_endpoint: Endpoint) -> None:
    assert check(ssh_endpoint, timeout=10.0) == ("online", None)
    with open_transport(ssh_endpoint, timeout=10.0) as t:
        assert t.run(["true"]).ok
