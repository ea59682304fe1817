#!/usr/bin/env python3
"""Push throughput on VIRTUAL devices over loopback: edgelab vs rsync/scp (SSH) and `adb push` (ADB).

One run: a random file (256 MiB by default) to the lab's SSH persona orin-agx and ADB persona s25,
then an unchanged re-push. Numbers are loopback figures against virtual devices (a real sshd,
the real adb server in front of edgelab's Python adbd emulator): they compare the tools on the
same path, they say nothing about a real device's link. Not part of the test suite.

    python bench/push.py [--size-mib 256] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from edgelab.artifacts.devstore import open_store
from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.push import BlobSpec, push_blob
from edgelab.sim.adb_lab import adb_binary, start_adb_lab, stop_adb_lab
from edgelab.sim.adb_lab import free_port as adb_free_port
from edgelab.sim.sshd import client_config, free_port, start_ssh_lab, stop_ssh_lab
from edgelab.transport.base import Endpoint
from edgelab.transport.quoting import Shell


class MemStamps:
    """In-memory verification records (the CLI keeps them in the database)."""

    def __init__(self) -> None:
        self.d: dict[str, tuple[int, str | None]] = {}

    def get(self, sha):
        return self.d.get(sha)

    def put(self, sha, size, stamp):
        self.d[sha] = (size, stamp)

    def drop(self, sha):
        self.d.pop(sha, None)


def timed(argv: list[str]) -> float:
    t0 = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.monotonic() - t0


def mbps(size: int, seconds: float) -> float:
    return size / seconds / 1e6 if seconds > 0 else float("inf")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--quick", action="store_true", help="4 MiB smoke run")
    args = ap.parse_args()
    size = (4 if args.quick else args.size_mib) << 20
    work = Path(tempfile.mkdtemp(prefix="edgelab-bench-push-"))
    rows: list[tuple[str, str, float]] = []  # (path, tool, seconds)
    ssh_state, adb_state = work / "ssh-lab", work / "adb-lab"
    try:
        blob_path = work / "blob.bin"
        with open(blob_path, "wb") as f:
            left = size
            while left:
                n = min(left, 8 << 20)
                f.write(os.urandom(n))
                left -= n
        sha = sha256_path(blob_path)
        blob = BlobSpec(blob_path, sha, size)

        # ---------------- SSH: edgelab (paramiko SFTP) vs rsync vs scp, same persona, same sshd
        from edgelab.transport.ssh import SSHTransport, close_all

        info = start_ssh_lab(ssh_state, ["orin-agx"], port=free_port(["127.0.0.11"]))
        try:
            cfg = work / "ssh_config"
            cfg.write_text(client_config(info))
            dev = info.device("orin-agx")
            ep = Endpoint(
                name=dev.name,
                kind="ssh",
                ssh_user=info.user,
                ssh_host=dev.address,
                ssh_port=dev.port,
                host_key_fingerprint=info.host_key_fingerprint,
                shell=Shell(dev.shell),
                extra={"identity_file": str(info.client_key_path), "known_hosts": str(info.known_hosts_path)},
            )
            remote_dir = work / "ssh-remote"  # the virtual device writes the lab host's disk
            remote_dir.mkdir()
            t = SSHTransport.connect(ep, timeout=60)
            store = open_store(t, root=str(remote_dir / "store"))
            stamps = MemStamps()
            r = push_blob(store, blob, stamps=stamps)
            rows.append(("ssh", "edgelab push (upload+device sha256+rename)", r.seconds))
            rows.append(("ssh", "  of which upload (SFTP, pipelined)", r.upload_seconds))
            rows.append(("ssh", "  of which device sha256sum + rename", r.verify_seconds))
            t0 = time.monotonic()
            r2 = push_blob(store, blob, stamps=stamps)
            rows.append(("ssh", f"edgelab re-push unchanged ({r2.status})", time.monotonic() - t0))
            t0 = time.monotonic()
            r3 = push_blob(store, blob, stamps=stamps, verify=True)
            rows.append(("ssh", f"edgelab re-push --verify ({r3.status})", time.monotonic() - t0))
            t.close()
            close_all()
            ssh = ["-F", str(cfg)]
            rows.append(
                (
                    "ssh",
                    "rsync",
                    timed(
                        ["rsync", "-e", f"ssh -F {cfg}", str(blob_path), f"orin-agx:{remote_dir}/rsync.bin"]
                    ),
                )
            )
            rows.append(
                ("ssh", "scp", timed(["scp", *ssh, str(blob_path), f"orin-agx:{remote_dir}/scp.bin"]))
            )
        finally:
            stop_ssh_lab(ssh_state)

        # ---------------- ADB: edgelab (sync, 64 KiB DATA) vs adb push, same emulator, same server
        from edgelab.transport.adb import ADBTransport

        lab = start_adb_lab(adb_state, ["s25"], base_port=adb_free_port(None))
        try:
            d = lab.device("s25")
            ep = Endpoint(
                name="s25", kind="adb", adb_serial=d.serial, adb_server=lab.adb_server, shell=Shell.TOYBOX
            )
            t = ADBTransport.connect(ep)
            store = open_store(t)
            t.run(["rm", "-rf", store.root, "/data/local/tmp/bench"])
            stamps = MemStamps()
            r = push_blob(store, blob, stamps=stamps)
            rows.append(("adb", "edgelab push (upload+device sha256+rename)", r.seconds))
            rows.append(("adb", "  of which upload (sync, 64 KiB DATA, segments)", r.upload_seconds))
            rows.append(("adb", "  of which device sha256sum + rename", r.verify_seconds))
            t0 = time.monotonic()
            r2 = push_blob(store, blob, stamps=stamps)
            rows.append(("adb", f"edgelab re-push unchanged ({r2.status})", time.monotonic() - t0))
            host, _, port = lab.adb_server.rpartition(":")
            rows.append(
                (
                    "adb",
                    "adb push",
                    timed(
                        [
                            adb_binary(),
                            "-H",
                            host,
                            "-P",
                            port,
                            "-s",
                            d.serial,
                            "push",
                            str(blob_path),
                            "/data/local/tmp/bench/adb.bin",
                        ]
                    ),
                )
            )
            t0 = time.monotonic()
            r3 = push_blob(store, blob, stamps=stamps, verify=True)
            rows.append(("adb", f"edgelab re-push --verify ({r3.status})", time.monotonic() - t0))
            t.run(["rm", "-rf", store.root, "/data/local/tmp/bench"])
        finally:
            stop_adb_lab(adb_state)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nedgelab push bench: {size / 2**20:.0f} MiB, VIRTUAL devices on loopback (not real links)\n")
    print(f"{'path':5} {'tool':48} {'seconds':>8} {'MB/s':>8}")
    for path, tool, sec in rows:
        print(f"{path:5} {tool:48} {sec:8.2f} {mbps(size, sec):8.1f}")
    get = {(p, t.split(" (")[0].strip()): s for p, t, s in rows}
    ours_ssh, ours_adb = get[("ssh", "edgelab push")], get[("adb", "edgelab push")]
    up_ssh, up_adb = get[("ssh", "of which upload")], get[("adb", "of which upload")]
    print("\nratios (throughput, edgelab / tool; goal >= 0.9):")
    print("                        end to end (with device sha256)   transfer alone")
    print(
        f"  ssh  edgelab/rsync    {get[('ssh', 'rsync')] / ours_ssh:5.2f}x {'':26} {get[('ssh', 'rsync')] / up_ssh:5.2f}x"
    )
    print(
        f"  ssh  edgelab/scp      {get[('ssh', 'scp')] / ours_ssh:5.2f}x {'':26} {get[('ssh', 'scp')] / up_ssh:5.2f}x"
    )
    print(
        f"  adb  edgelab/adb push {get[('adb', 'adb push')] / ours_adb:5.2f}x {'':26} {get[('adb', 'adb push')] / up_adb:5.2f}x"
    )
    print("unchanged re-push (goal <= 1 s):")
    print(
        f"  ssh  {get[('ssh', 'edgelab re-push unchanged')]:.2f} s   adb  {get[('adb', 'edgelab re-push unchanged')]:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
