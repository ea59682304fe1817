#!/usr/bin/env python3
"""Push to the VIRTUAL Windows devices over loopback: edgelab vs scp, and vs the Linux persona.

One run: a random file (64 MiB by default) pushed by edgelab (SFTP, then Get-FileHash on the
device and Move-Item into the store) to win-hx370-rtx5090 (OpenSSH DefaultShell powershell.exe)
and xelite-pc (cmd.exe), to orin-agx (Linux, the named peer: same sshd, hash while receiving),
and copied by plain ``scp`` to the Windows drive (the second peer: bytes only, no verification);
then an unchanged re-push. These are loopback figures against virtual devices whose PowerShell is
a Python shim: they compare the paths on the same box, never a real Windows machine's link.

    python benchmarks/push_windows.py [--size-mib 64] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from edgelab.artifacts.devstore import open_store
from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.push import BlobSpec, push_blob
from edgelab.sim.lab import ssh_endpoint
from edgelab.sim.sshd import free_port, start_ssh_lab, stop_ssh_lab
from edgelab.transport.ssh import SSHTransport, close_all

DEVICES = ["win-hx370-rtx5090", "xelite-pc", "orin-agx"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="edgelab-bench-win-") as tmp:
        tmp_path = Path(tmp)
        src = tmp_path / "blob.bin"
        with open(src, "wb") as f:
            for _ in range(args.size_mib):
                f.write(os.urandom(1 << 20))
        size = src.stat().st_size
        blob = BlobSpec(src, sha256_path(src), size)
        state = tmp_path / "lab"
        info = start_ssh_lab(state, DEVICES, port=free_port(["127.0.0.11", "127.0.0.15", "127.0.0.16"]))
        rows: dict[str, list[float]] = {}
        repush: dict[str, tuple[str, int, float]] = {}
        try:
            for _round in range(args.repeat):
                for name in DEVICES:
                    t = SSHTransport.connect(ssh_endpoint(info, name), timeout=60)
                    try:
                        store = open_store(t)
                        store.remove([store.blob(blob.sha256)])
                        t0 = time.monotonic()
                        res = push_blob(store, blob)
                        rows.setdefault(f"edgelab push -> {name}", []).append(time.monotonic() - t0)
                        assert res.status == "uploaded", res
                        t0 = time.monotonic()
                        again = push_blob(store, blob)
                        repush[name] = (again.status, again.sent, time.monotonic() - t0)
                    finally:
                        t.close()
                for name in DEVICES[:2]:
                    dest = f"{name}:/C:/Users/edgelab/scp-copy.bin"
                    t0 = time.monotonic()
                    subprocess.run(["scp", "-q", "-F", str(info.ssh_config_path), str(src), dest], check=True)
                    rows.setdefault(f"scp (no verify) -> {name}", []).append(time.monotonic() - t0)
        finally:
            close_all()
            stop_ssh_lab(state)
    mib = size / (1 << 20)
    peer = statistics.median(rows["edgelab push -> orin-agx"])
    print(f"VIRTUAL devices, loopback, {mib:.0f} MiB, {args.repeat} rounds (median; best)")
    for label, secs in rows.items():
        med = statistics.median(secs)
        print(
            f"  {label:38s} {mib / med:7.1f} MiB/s  best {mib / min(secs):7.1f}  "
            f"x{peer / med:4.2f} of edgelab->orin-agx"
        )
    for name, (status, sent, secs) in repush.items():
        print(f"  unchanged re-push -> {name:20s} {status}, {sent} bytes sent, {secs * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
