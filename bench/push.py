#!/usr/bin/env python3
"""Push throughput on VIRTUAL devices over loopback: edgelab vs rsync/scp (SSH) and `adb push` (ADB).

One run: a random file (256 MiB by default) to the lab's SSH persona orin-agx and ADB persona s25,
then an unchanged re-push. Numbers are loopback figures against virtual devices (a real sshd,
the real adb server in front of edgelab's Python adbd emulator): they compare the tools on the
same path, they say nothing about a real device's link. Not part of the test suite.

edgelab's device-side SHA-256 runs while the bytes arrive (it follows ``.part``), so "sha256 tail"
is only what is left of it once the upload ends; the upload row includes the overlapped hashing.

Each full push is repeated (``--repeat``, interleaved edgelab / rsync / scp and edgelab / adb push)
and the best and the median of the rounds are printed: on a shared 2-core box a single round can be
off by 2x either way, for any tool.

    python bench/push.py [--size-mib 256] [--quick] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
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
from edgelab.sim.lab import ssh_endpoint
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
    ap.add_argument("--repeat", type=int, default=3, help="rounds of each full push (best and median kept)")
    args = ap.parse_args()
    rounds = max(1, args.repeat)
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
            ep = ssh_endpoint(info, "orin-agx")
            remote_dir = work / "ssh-remote"  # the virtual device writes the lab host's disk
            remote_dir.mkdir()
            ssh = ["-F", str(cfg)]
            for i in range(rounds):
                t = SSHTransport.connect(ep, timeout=60)
                store = open_store(t, root=str(remote_dir / "store"))
                t.run(["rm", "-rf", store.root])
                stamps = MemStamps()
                r = push_blob(store, blob, stamps=stamps)
                rows.append(("ssh", "edgelab push (upload+device sha256+rename)", r.seconds))
                rows.append(("ssh", "  of which upload (SFTP, pipelined)", r.upload_seconds))
                rows.append(("ssh", "  of which sha256 tail + rename (after upload)", r.verify_seconds))
                if i == rounds - 1:
                    t0 = time.monotonic()
                    r2 = push_blob(store, blob, stamps=stamps)
                    rows.append(("ssh", f"edgelab re-push unchanged ({r2.status})", time.monotonic() - t0))
                    t0 = time.monotonic()
                    r3 = push_blob(store, blob, stamps=stamps, verify=True)
                    rows.append(("ssh", f"edgelab re-push --verify ({r3.status})", time.monotonic() - t0))
                t.close()
                close_all()
                dest = remote_dir / "rsync.bin"
                rsync_e = f"ssh -F {cfg}"
                rows.append(
                    ("ssh", "rsync", timed(["rsync", "-e", rsync_e, str(blob_path), f"orin-agx:{dest}"]))
                )
                dest.unlink()  # next round sends it all again (no delta against a copy)
                rows.append(
                    ("ssh", "scp", timed(["scp", *ssh, str(blob_path), f"orin-agx:{remote_dir}/scp.bin"]))
                )
                (remote_dir / "scp.bin").unlink()
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
            host, _, port = lab.adb_server.rpartition(":")
            adb_push = [adb_binary(), "-H", host, "-P", port, "-s", d.serial, "push", str(blob_path)]
            for i in range(rounds):
                t.run(["rm", "-rf", store.root, "/data/local/tmp/bench"])
                stamps = MemStamps()
                r = push_blob(store, blob, stamps=stamps)
                rows.append(("adb", "edgelab push (upload+device sha256+rename)", r.seconds))
                rows.append(("adb", "  of which upload (sync, 64 KiB DATA, segments)", r.upload_seconds))
                rows.append(("adb", "  of which sha256 tail + rename (after upload)", r.verify_seconds))
                if i == rounds - 1:
                    t0 = time.monotonic()
                    r2 = push_blob(store, blob, stamps=stamps)
                    rows.append(("adb", f"edgelab re-push unchanged ({r2.status})", time.monotonic() - t0))
                    t0 = time.monotonic()
                    r3 = push_blob(store, blob, stamps=stamps, verify=True)
                    rows.append(("adb", f"edgelab re-push --verify ({r3.status})", time.monotonic() - t0))
                rows.append(("adb", "adb push", timed([*adb_push, "/data/local/tmp/bench/adb.bin"])))
            t.run(["rm", "-rf", store.root, "/data/local/tmp/bench"])
        finally:
            stop_adb_lab(adb_state)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nedgelab push bench: {size / 2**20:.0f} MiB, VIRTUAL devices on loopback (not real links),")
    print(f"best and median of {rounds} interleaved round(s) on a shared machine\n")
    order: list[tuple[str, str]] = []
    runs: dict[tuple[str, str], list[float]] = {}
    for path, tool, sec in rows:
        if (path, tool) not in runs:
            order.append((path, tool))
        runs.setdefault((path, tool), []).append(sec)
    print(f"{'path':5} {'tool':48} {'best s':>7} {'MB/s':>7} {'median s':>9} {'MB/s':>7}")
    for path, tool in order:
        secs = runs[(path, tool)]
        best, med = min(secs), statistics.median(secs)
        print(f"{path:5} {tool:48} {best:7.2f} {mbps(size, best):7.1f} {med:9.2f} {mbps(size, med):7.1f}")
    best = {(p, t.split(" (")[0].strip()): min(v) for (p, t), v in runs.items()}
    med = {(p, t.split(" (")[0].strip()): statistics.median(v) for (p, t), v in runs.items()}

    def ratio(d: dict, path: str, tool: str, ours: str) -> float:
        return d[(path, tool)] / d[(path, ours)]

    print("\nratios (throughput, edgelab / tool; goal >= 0.9):      best      median")
    for path, tool, label in (
        ("ssh", "rsync", "edgelab/rsync   "),
        ("ssh", "scp", "edgelab/scp     "),
        ("adb", "adb push", "edgelab/adb push"),
    ):
        print(
            f"  {path}  {label} end to end (with device sha256) "
            f"{ratio(best, path, tool, 'edgelab push'):5.2f}x    {ratio(med, path, tool, 'edgelab push'):5.2f}x"
        )
        print(
            f"  {path}  {label} transfer alone                  "
            f"{ratio(best, path, tool, 'of which upload'):5.2f}x    {ratio(med, path, tool, 'of which upload'):5.2f}x"
        )
    print("unchanged re-push (goal <= 1 s):")
    print(
        f"  ssh  {best[('ssh', 'edgelab re-push unchanged')]:.2f} s   "
        f"adb  {best[('adb', 'edgelab re-push unchanged')]:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
