"""The ADB receive (``DeviceStore.receive``): bytes, device-side SHA-256 and rename in one shell v2
command, on a virtual phone behind the real adb server. What lands under the blob's name is only
ever a file whose whole SHA-256, over what the device STORED, matched; a wrong byte anywhere (sent
or already in the resumed ``.part``) never lands; a resume continues from the prefix; the hasher's
answer is read strictly on the device and here."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest
from fixtures.adb_lab import adb_endpoint

from edgelab.artifacts import devstore
from edgelab.artifacts.devstore import DeviceStore, open_store, parse_receive
from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.push import BlobSpec, push_blob
from edgelab.errors import HashMismatch, TransportError
from edgelab.transport.adb import ADBTransport
from edgelab.transport.base import RunResult

PERSONA = "s24"  # its own store root per test: other tests may use this phone
RECEIVE_STEP = 1 << 20  # the hasher's read step in these tests: several steps in a few MiB


@pytest.fixture(autouse=True)
def _small_steps(monkeypatch):
    monkeypatch.setattr(devstore, "RECEIVE_STEP", RECEIVE_STEP)


@pytest.fixture
def store(adb_lab):
    t = ADBTransport.connect(adb_endpoint(adb_lab, PERSONA))
    s = open_store(t, root=f"/data/local/tmp/edgelab-receive-{uuid.uuid4().hex[:8]}")
    try:
        yield s
    finally:
        t.run(["rm", "-rf", s.root])
        t.close()


def _blob(tmp_path: Path, size: int) -> BlobSpec:
    p = tmp_path / "blob.bin"
    p.write_bytes(os.urandom(size))
    return BlobSpec(p, sha256_path(p), size)


def _names(store: DeviceStore) -> set[str]:
    res = store.t.run(["sh", "-c", 'cd "$1" && ls -a', "x", store.root])
    return {n for n in res.stdout.split() if n not in (".", "..")}


def _write_part(store: DeviceStore, sha: str, data: bytes, tmp_path: Path) -> None:
    src = tmp_path / "prefix.bin"
    src.write_bytes(data)
    store.ensure()
    store.t.put(src, store.part(sha), offset=0)


def test_receive_lands_verified_and_says_which_hasher(store, tmp_path):
    blob = _blob(tmp_path, 3 * RECEIVE_STEP + 12_345)  # several steps and a ragged end
    res = push_blob(store, blob)
    assert res.status == "uploaded" and res.sent == blob.size
    assert res.hasher == "openssl"  # probed in the push's first command: the virtual phone has it
    assert res.via and res.via.startswith("adb shell v2 stdin")
    assert store.t.get(res.remote_path, tmp_path / "back.bin") == blob.sha256
    assert _names(store) == {blob.sha256}  # no .part, no hasher output left


def test_a_wrong_byte_sent_never_lands(store, tmp_path):
    blob = _blob(tmp_path, 2 * RECEIVE_STEP + 7)
    data = bytearray(blob.path.read_bytes())
    data[RECEIVE_STEP + 3] ^= 0x01  # the file changed after it was hashed: one bit, mid-file
    blob.path.write_bytes(bytes(data))
    with pytest.raises(HashMismatch, match="on the device after upload"):
        push_blob(store, blob)
    assert _names(store) == set()  # neither the blob nor its .part


def test_a_wrong_byte_already_stored_is_hashed_too(store, tmp_path):
    """The digest covers what the device stored, the resumed prefix included: a prefix that went
    bad on the device is caught even though every byte sent was right."""
    blob = _blob(tmp_path, 2 * RECEIVE_STEP + 99)
    prefix = bytearray(blob.path.read_bytes()[: RECEIVE_STEP + 5])
    prefix[17] ^= 0x80
    _write_part(store, blob.sha256, bytes(prefix), tmp_path)
    with pytest.raises(HashMismatch):
        store.receive(blob.path, blob.sha256, len(prefix), blob.size)
    assert _names(store) == set()


def test_resume_sends_only_the_rest(store, tmp_path):
    blob = _blob(tmp_path, 3 * RECEIVE_STEP + 1)
    have = RECEIVE_STEP + 4096
    _write_part(store, blob.sha256, blob.path.read_bytes()[:have], tmp_path)
    res = push_blob(store, blob)
    assert res.status == "resumed" and res.resumed_from == have and res.sent == blob.size - have
    assert store.t.get(res.remote_path, tmp_path / "back.bin") == blob.sha256
    assert _names(store) == {blob.sha256}


def test_a_part_shorter_than_the_resume_point_is_refused(store, tmp_path):
    blob = _blob(tmp_path, RECEIVE_STEP + 10)
    _write_part(store, blob.sha256, blob.path.read_bytes()[:1000], tmp_path)
    with pytest.raises(TransportError, match="cannot resume"):
        store.receive(blob.path, blob.sha256, 5000, blob.size)
    assert _names(store) == {blob.sha256 + ".part"}  # left for the next push to check


class _BrokenHasher(DeviceStore):
    """A device whose SHA-256 tool prints something else than a digest (the upper-case digest of
    the right bytes: close, but not the strict format)."""

    @property
    def _hash_fn(self) -> str:
        return 'hasher=broken; h() { sha256sum "$@" | tr a-f A-F; }; '


def test_hasher_output_is_read_strictly(store, tmp_path):
    blob = _blob(tmp_path, RECEIVE_STEP + 3)
    broken = _BrokenHasher(store.t, store.root)
    with pytest.raises(TransportError, match="printed no SHA-256 line"):
        broken.receive(blob.path, blob.sha256, 0, blob.size)
    assert blob.sha256 not in _names(store)  # not renamed; .part kept: the bytes may well be right
    assert push_blob(store, blob).status == "resumed"  # a working hasher takes it from there


_STAT = "12|2026-01-01 00:00:00.000000000 +0000|5"


@pytest.mark.parametrize(
    "stdout",
    [
        "",
        "{sha} *stdin\n",  # no stat line
        "{sha} *stdin\n{stat}\nextra\n",
        "{sha} *stdin\n{sha} *stdin\n{stat}\n",
        "{other} *stdin\n{stat}\n",  # not the blob's digest
        "{upper} *stdin\n{stat}\n",
        "{sha}\n{stat}\n",  # no separator: not a hasher's line
        "sha256 {sha}\n{stat}\n",
        "{sha}  -\n12|2026-01-01\n",
    ],
)
def test_receive_answer_parsed_strictly(stdout):
    sha, other = "ab" * 32, "cd" * 32
    text = stdout.format(sha=sha, other=other, upper=sha.upper(), stat=_STAT)
    with pytest.raises(TransportError, match="unexpected answer"):
        parse_receive(RunResult(("sh",), 0, text, ""), sha, "phone")


@pytest.mark.parametrize("line", ["{sha} *stdin", "{sha}  -"])  # openssl -r, sha256sum/toybox
def test_receive_answer_accepted(line):
    sha = "ab" * 32
    res = RunResult(("sh",), 0, line.format(sha=sha) + "\n" + _STAT + "\n", "")
    assert parse_receive(res, sha, "phone") == (12, "2026-01-01 00:00:00.000000000 +0000|5")


def test_mismatch_answer_is_a_hash_mismatch():
    res = RunResult(("sh",), 3, "mismatch " + "cd" * 32 + "\n", "")
    with pytest.raises(HashMismatch, match="hashed cdcdcdcdcdcd"):
        parse_receive(res, "ab" * 32, "phone")


def test_cut_receive_resumes_and_leaves_no_process(adb_lab, tmp_path):
    """The connection torn down mid-receive: the device ends the command (its hasher included),
    the retry resumes from what reached ``.part``, and nothing of the cut one lingers."""
    from artifacts.test_push_adb import _sockets_to

    t = ADBTransport.connect(adb_endpoint(adb_lab, "rb3g2"))  # the phone whose connections get cut
    store = open_store(t, root=f"/data/local/tmp/edgelab-receive-{uuid.uuid4().hex[:8]}")
    try:
        blob = _blob(tmp_path, 24 << 20)
        server_port = int(adb_lab.adb_server.rpartition(":")[2])
        cut = []

        def progress(sha, done, total):
            if not cut and done >= total // 2:
                wait = (
                    'i=0; while [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -lt 4194304 ]; do '
                    "i=$((i + 1)); [ $i -lt 400 ] || exit 9; sleep 0.05; done"
                )
                assert store.t.run(["sh", "-c", wait, "x", store.part(sha)], timeout=60).ok
                for fd in _sockets_to(server_port):
                    with socket.socket(fileno=os.dup(fd)) as dup:
                        dup.shutdown(socket.SHUT_RDWR)
                cut.append(done)

        res = push_blob(store, blob, progress=progress, attempts=5)
        assert cut and res.status == "resumed" and res.resumed_from >= 4 << 20
        assert store.t.get(res.remote_path, tmp_path / "back.bin") == blob.sha256
        assert _names(store) == {blob.sha256}
        script = 'for i in $(seq 50); do pgrep -f "$1" >/dev/null || exit 0; sleep 0.1; done; pgrep -af "$1"; exit 1'
        pattern = "[" + store.root[0] + "]" + store.root[1:] + "/"  # a regex that does not match itself
        left = t.run(["sh", "-c", script, "x", pattern], timeout=30)
        assert left.ok, f"processes of the cut receive still run: {left.stdout}"
    finally:
        t.run(["rm", "-rf", store.root])
        t.close()


def test_fed_command_may_speak_while_it_reads(store, tmp_path):
    """Output before the last input byte (a warning on stderr) neither stops the sending nor is lost."""
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(9 << 20))
    path = store.root + "/fed.bin"
    script = 'mkdir -p "${1%/*}"; echo early >&2; echo first; cat > "$1"; stat -c %s "$1"'
    res = store.t.run_fed(["sh", "-c", script, "x", path], src)
    assert res.ok and res.stdout.split() == ["first", str(9 << 20)] and res.stderr.strip() == "early"
    assert store.t.get(path, tmp_path / "back.bin") == sha256_path(src)


def test_fed_command_that_refuses_keeps_its_answer(store, tmp_path):
    """A command that ends without reading its stdin: its exit status and words come back (not a
    broken pipe), however much was still to send."""
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(48 << 20))
    res = store.t.run_fed(["sh", "-c", "echo no thanks >&2; exit 7"], src)
    assert res.exit_code == 7 and res.stderr.strip() == "no thanks"
