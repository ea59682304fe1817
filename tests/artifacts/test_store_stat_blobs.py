"""``stat_blobs``: an unchanged re-push asks the device ONE command (store root and every blob's stamp).

On the real sshd (POSIX, root under ``$HOME``) and the real adb server in front of the emulator
(toybox, fixed root): the answer is the one ``open_store`` + ``inspect`` give in two or more
commands, a missing blob reads as absent, nothing is created on the device, and what the command
learnt of the store (POSIX: root and hasher) spares the push that follows its own question.
"""

from __future__ import annotations

import hashlib
import os

import pytest
from fixtures.adb_lab import adb_endpoint

from edgelab.artifacts.devstore import _MEMO_KEY, open_store, stat_blobs
from edgelab.transport.adb import ADBTransport


class _Counting:
    """The transport, with its commands counted (every command is one round trip)."""

    def __init__(self, t):
        self.t, self.commands = t, []

    def __getattr__(self, name):
        return getattr(self.t, name)

    def run(self, argv, **kw):
        self.commands.append(argv)
        return self.t.run(argv, **kw)


def _check(t) -> None:
    store = open_store(t)
    data = os.urandom(4096)
    sha = hashlib.sha256(data).hexdigest()
    absent = hashlib.sha256(data + b"x").hexdigest()
    assert t.run(["mkdir", "-p", store.root]).ok
    assert t.run(["sh", "-c", 'printf x > "$1"', "put", store.blob(sha)]).ok
    try:
        for fresh in (True, False):  # a connection that knows nothing of the store yet, then one that does
            if fresh:
                t.memo.pop(_MEMO_KEY, None)
            counted = _Counting(t)
            seen = stat_blobs(counted, [sha, absent])
            assert seen is not None and len(counted.commands) == 1, counted.commands
            quick, stats = seen
            assert (quick.root, quick.hasher) == (store.root, store.hasher)
            assert stats == [store.inspect(sha)[0], None]
            assert stats[0] is not None and stats[0][0] == 1
            # what it learnt is the connection's: the push that follows a miss asks nothing again
            again = open_store(counted)
            assert len(counted.commands) == 1 and (again.root, again.hasher) == (store.root, store.hasher)
        assert not t.run(["test", "-e", store.blob(absent)]).ok
    finally:
        t.run(["rm", "-f", store.blob(sha)])


def test_ssh_store_root_and_stamps_in_one_command(ssh_transport) -> None:
    _check(ssh_transport)


@pytest.mark.parametrize("persona", ["sa8775p"])
def test_adb_store_root_and_stamps_in_one_command(adb_lab, persona) -> None:
    t = ADBTransport.connect(adb_endpoint(adb_lab, persona))
    try:
        _check(t)
    finally:
        t.close()


def test_a_push_learns_the_store_and_its_first_blob_in_one_command(ssh_transport) -> None:
    """``open_store(inspect=sha)`` on a connection that knows nothing yet: $HOME, the hasher and the
    blob's and its ``.part``'s stats in the one command resolving the store costs anyway; the first
    ``inspect`` is answered from it, the next one asks again (a retry sees the device as it is)."""
    t = ssh_transport
    plain = open_store(t)
    data = os.urandom(2048)
    sha = hashlib.sha256(data).hexdigest()
    assert t.run(["mkdir", "-p", plain.root]).ok
    assert t.run(["sh", "-c", 'printf abc > "$1"', "put", plain.part(sha)]).ok
    try:
        t.memo.pop(_MEMO_KEY, None)
        counted = _Counting(t)
        store = open_store(counted, inspect=sha)
        assert len(counted.commands) == 1 and (store.root, store.hasher) == (plain.root, plain.hasher)
        first = store.inspect(sha, probe=True)
        assert len(counted.commands) == 1  # answered from the store's own command
        assert first == plain.inspect(sha) and first[0] is None and first[1] is not None and first[1][0] == 3
        assert store.inspect(sha) == first and len(counted.commands) == 2  # asked again
    finally:
        t.run(["rm", "-f", plain.part(sha)])
