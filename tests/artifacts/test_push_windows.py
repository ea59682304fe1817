"""Windows device store: path logic, and Get-FileHash verification through the lab's PowerShell shim.

The full push (64 MiB, cut and resumed) to both Windows personas is in test_windows_lab.py.
"""

from __future__ import annotations

import os

import pytest
from fixtures.ssh_lab import lab_endpoint

from edgelab.artifacts.devstore import WindowsStore, open_store
from edgelab.artifacts.hashing import sha256_path
from edgelab.errors import TransportError
from edgelab.transport.ssh import SSHTransport

WIN = "win-hx370-rtx5090"


def test_windows_paths(local_transport):
    s = WindowsStore(local_transport, "C:\\Users\\lab\\AppData\\Local\\edgelab\\store")
    sha = "ab" * 32
    assert s.blob(sha) == "C:\\Users\\lab\\AppData\\Local\\edgelab\\store\\" + sha
    assert s.part(sha) == s.blob(sha) + ".part"
    assert s.sftp_path(s.part(sha)) == "/C:/Users/lab/AppData/Local/edgelab/store/" + sha + ".part"


@pytest.fixture
def win(ssh_lab):
    t = SSHTransport.connect(lab_endpoint(ssh_lab, WIN), timeout=30)
    try:
        yield t
    finally:
        t.close()


def test_get_filehash_verifies_on_the_windows_persona(win, tmp_path):
    f = tmp_path / "model.bin"
    f.write_bytes(os.urandom(5000))
    store = WindowsStore(win, str(tmp_path))
    assert store.sha256(str(f), 5000) == sha256_path(f)
    assert store.hasher_name == "Get-FileHash"  # what a push reports as its device-side hasher
    with pytest.raises(TransportError, match="Get-FileHash"):
        store.sha256(str(tmp_path / "absent.bin"), 0)


def test_open_store_resolves_localappdata(win):
    store = open_store(win)
    assert (
        isinstance(store, WindowsStore) and store.root == "C:\\Users\\edgelab\\AppData\\Local\\edgelab\\store"
    )
