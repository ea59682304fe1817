"""Each SSH persona of the virtual lab has its own $HOME in the lab's state dir, so a device store
at ``~/.edgelab/store`` on a virtual device never writes into the lab host's real home."""

from __future__ import annotations

import os
from pathlib import Path

from fixtures.ssh_lab import lab_endpoint

from edgelab.artifacts.devstore import open_store
from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.push import BlobSpec, push_blob
from edgelab.sim.sshd import persona_home
from edgelab.transport.ssh import SSHTransport


def test_each_persona_has_its_own_home_and_store(ssh_lab, tmp_path):
    names = [d.name for d in ssh_lab.devices][:2]
    homes = {}
    for name in names:
        t = SSHTransport.connect(lab_endpoint(ssh_lab, name), timeout=30)
        try:
            res = t.run(["sh", "-c", 'printf "%s|%s" "$HOME" "$(pwd)"'])
            home, _, cwd = res.stdout.partition("|")
            homes[name] = home
            assert Path(home) == persona_home(ssh_lab.state_dir, name)
            assert cwd == home  # a session starts in its home, as sshd does
            assert open_store(t).root == home + "/.edgelab/store"
        finally:
            t.close()
    assert len(set(homes.values())) == len(names)
    assert all(h != os.path.expanduser("~") for h in homes.values())


def test_push_to_default_store_lands_in_the_persona_home(ssh_lab, tmp_path):
    name = ssh_lab.devices[0].name
    p = tmp_path / "b.bin"
    p.write_bytes(os.urandom(200_000))
    blob = BlobSpec(p, sha256_path(p), p.stat().st_size)
    real = Path(os.path.expanduser("~")) / ".edgelab" / "store" / blob.sha256
    t = SSHTransport.connect(lab_endpoint(ssh_lab, name), timeout=30)
    try:
        res = push_blob(open_store(t), blob)
    finally:
        t.close()
    where = persona_home(ssh_lab.state_dir, name) / ".edgelab" / "store" / blob.sha256
    assert Path(res.remote_path) == where and sha256_path(where) == blob.sha256
    assert not real.exists()  # the lab host's own home was not written
