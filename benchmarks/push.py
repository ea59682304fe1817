#!/usr/bin/env python3
"""Verified push as whole commands on VIRTUAL devices over loopback: `edgelab push` vs its peers.

Every figure is the wall time of a whole command as a user types it, start-up included:

  SSH (persona orin-agx, one real sshd): ``edgelab push NAME -d orin-agx``, ``rsync -e ssh FILE D:``,
  ``scp FILE D:`` and the hand-verified peer ``scp FILE D: && ssh D sha256sum FILE``.
  ADB (persona s25, the real adb server in front of edgelab's adbd emulator): ``edgelab push NAME
  -d s25``, ``adb push FILE`` and the hand-verified peer ``adb push FILE && adb shell sha256sum FILE``.

Before each timed ``edgelab push`` the device's copy goes with ``edgelab store rm`` (blob and record:
a fresh push, as a user makes one); a second row times the push after the store was wiped behind
edgelab's back (its record says verified, the check finds the blob gone: one connection more),
plus an unchanged re-push (``edgelab push`` again: the blob is recorded as verified), and how
edgelab's bytes travelled (``"via"``: the OpenSSH client and its cipher, or SFTP and why; the
device's SHA-256 tool) from one more, untimed, push. Rounds are
interleaved per tool and the median is kept (``--repeat``): on a shared 2-core box one round can be
off by 2x for any tool. Loopback numbers compare the tools on the same path; they say nothing
about a real device's link. Goals (issue 14): >= 0.9x rsync over SSH, >= 1.0x the hand-verified
peer over ADB, unchanged re-push <= 1 s.

    python benchmarks/push.py [--sizes 16,256,1024] [--repeat 3] [--files 50]

A last section pushes one artifact of ``--files`` small files (a runtime build's shape) against
``rsync -r``, ``scp -r`` and ``adb push`` of the directory (none of which verifies on the device).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from edgelab.sim.adb_lab import adb_binary, start_adb_lab, stop_adb_lab
from edgelab.sim.adb_lab import free_port as adb_free_port
from edgelab.sim.lab import LabStatus, register
from edgelab.sim.sshd import client_config, free_port, start_ssh_lab, stop_ssh_lab


def timed(cmd: list[str] | str, env: dict[str, str]) -> float:
    t0 = time.monotonic()
    res = subprocess.run(
        cmd,
        shell=isinstance(cmd, str),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    took = time.monotonic() - t0
    if res.returncode != 0:
        raise SystemExit(f"{cmd!r} failed ({res.returncode}): {res.stderr.decode(errors='replace')[-400:]}")
    return took


def run(cmd: list[str], env: dict[str, str]) -> str:
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,256,1024", help="MiB, comma-separated (default 16,256,1024)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per tool and size (median kept)")
    ap.add_argument(
        "--files", type=int, default=50, help="also push a directory of this many 100 KiB files (0: skip)"
    )
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    load_before = os.getloadavg()
    rounds = max(1, args.repeat)
    edgelab = shutil.which("edgelab") or str(Path(sys.executable).with_name("edgelab"))
    work = Path(tempfile.mkdtemp(prefix="edgelab-bench-push-"))
    ssh_state, adb_state = work / "ssh-lab", work / "adb-lab"
    results: dict[int, dict[str, list[float]]] = {}
    many_times: dict[str, list[float]] = {}
    paths: dict[int, dict[str, str]] = {}
    try:
        info = start_ssh_lab(ssh_state, ["orin-agx"], port=free_port(["127.0.0.11"]))
        lab = start_adb_lab(adb_state, ["s25"], base_port=adb_free_port(None))
        try:
            env = {
                **os.environ,
                "EDGELAB_HOME": str(work / "home"),
                "EDGELAB_DB": str(work / "bench.db"),
                "EDGELAB_SIM_DIR": str(ssh_state),
                "NO_COLOR": "1",
            }
            env.pop("COLUMNS", None)
            # edgelab from bytecode, as installed (pip compiles it): PYTHONDONTWRITEBYTECODE=1 in the
            # shell would make every timed edgelab command recompile its modules (tens of ms each)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            register(env["EDGELAB_DB"], LabStatus(ssh_state, ssh=info, adb=lab), check=False)
            cfg = work / "ssh_config"
            cfg.write_text(client_config(info))
            ssh = ["ssh", "-F", str(cfg), "orin-agx"]
            host, _, port = lab.adb_server.rpartition(":")
            serial = lab.device("s25").serial
            adb = [adb_binary(), "-H", host, "-P", port, "-s", serial]
            run([*ssh, "mkdir -p bench"], env)
            run([*adb, "shell", "mkdir -p /data/local/tmp/bench"], env)
            q = shlex.quote
            for mib in sizes:
                blob = work / f"blob-{mib}m.bin"
                with open(blob, "wb") as f:
                    for _ in range(mib):
                        f.write(os.urandom(1 << 20))
                name = f"bench-{mib}m"
                run(
                    [
                        edgelab,
                        "artifact",
                        "add",
                        str(blob),
                        "--kind",
                        "weights",
                        "--target",
                        "any",
                        "--name",
                        name,
                        "--replace",
                    ],
                    env,
                )
                rem_ssh = f"bench/{blob.name}"
                rem_adb = f"/data/local/tmp/bench/{blob.name}"
                ssh_s, adb_s = " ".join(map(q, ssh)), " ".join(map(q, adb))
                el = q(edgelab)
                tools = {
                    # a fresh push as a user makes one: the device's copy and its record removed
                    "ssh edgelab push": (
                        f"{el} store rm orin-agx {q(name)}",
                        [edgelab, "push", name, "-d", "orin-agx"],
                    ),
                    # the store wiped behind edgelab's back: the record says verified, the check finds
                    # it gone, the push follows (one connection and one round trip more)
                    "ssh edgelab push, stale record": (
                        f"{ssh_s} rm -rf .edgelab/store",
                        [edgelab, "push", name, "-d", "orin-agx"],
                    ),
                    "ssh rsync": (
                        f"{ssh_s} rm -f {q(rem_ssh)}",
                        ["rsync", "-e", f"ssh -F {cfg}", str(blob), f"orin-agx:{rem_ssh}"],
                    ),
                    "ssh scp": (
                        f"{ssh_s} rm -f {q(rem_ssh)}",
                        ["scp", "-F", str(cfg), str(blob), f"orin-agx:{rem_ssh}"],
                    ),
                    "ssh scp + ssh sha256sum": (
                        f"{ssh_s} rm -f {q(rem_ssh)}",
                        f"scp -F {q(str(cfg))} {q(str(blob))} orin-agx:{q(rem_ssh)} && {ssh_s} sha256sum {q(rem_ssh)}",
                    ),
                    "adb edgelab push": (
                        f"{el} store rm s25 {q(name)}",
                        [edgelab, "push", name, "-d", "s25"],
                    ),
                    # the same tool as the hand-verified peer: what the faster hasher is worth
                    "adb edgelab push, sha256sum": (
                        f"{el} store rm s25 {q(name)}",
                        [edgelab, "push", name, "-d", "s25"],
                        {"EDGELAB_HASHERS": "sha256sum"},
                    ),
                    "adb edgelab push, stale record": (
                        f"{adb_s} shell rm -rf /data/local/tmp/edgelab/store",
                        [edgelab, "push", name, "-d", "s25"],
                    ),
                    "adb adb push": (f"{adb_s} shell rm -f {q(rem_adb)}", [*adb, "push", str(blob), rem_adb]),
                    "adb adb push + adb shell sha256sum": (
                        f"{adb_s} shell rm -f {q(rem_adb)}",
                        f"{adb_s} push {q(str(blob))} {q(rem_adb)} && {adb_s} shell sha256sum {q(rem_adb)}",
                    ),
                }
                times: dict[str, list[float]] = {k: [] for k in tools}
                for _ in range(rounds):
                    for tool, (reset, cmd, *extra) in tools.items():
                        subprocess.run(reset, shell=True, env=env, check=True, capture_output=True)
                        times[tool].append(timed(cmd, {**env, **(extra[0] if extra else {})}))
                # unchanged re-push, the blob recorded as verified by the last round
                times["ssh edgelab re-push unchanged"] = [
                    timed([edgelab, "push", name, "-d", "orin-agx"], env) for _ in range(rounds)
                ]
                times["adb edgelab re-push unchanged"] = [
                    timed([edgelab, "push", name, "-d", "s25"], env) for _ in range(rounds)
                ]
                out = json.loads(run([edgelab, "push", name, "-d", "orin-agx", "-d", "s25", "--json"], env))
                assert all(b["status"] == "present" for d in out for b in d["blobs"]), out
                # one more fresh push, untimed, to say how edgelab's bytes travelled and what hashed them
                run([*ssh, "rm -rf .edgelab/store"], env)
                run([*adb, "shell", "rm -rf /data/local/tmp/edgelab/store"], env)
                out = json.loads(run([edgelab, "push", name, "-d", "orin-agx", "-d", "s25", "--json"], env))
                paths[mib] = {
                    d["device"]: f"via {b.get('via') or '?'}, device hasher {b.get('hasher') or '?'}"
                    for d in out
                    for b in d["blobs"]
                }
                results[mib] = times
                run([*ssh, f"rm -f {q(rem_ssh)}; rm -rf .edgelab/store"], env)
                run([*adb, "shell", f"rm -f {rem_adb}; rm -rf /data/local/tmp/edgelab/store"], env)
                blob.unlink()
            if args.files > 0:
                many = work / "many"
                many.mkdir()
                for i in range(args.files):
                    (many / f"f{i:03d}.bin").write_bytes(os.urandom(100 << 10))
                run(
                    [
                        edgelab,
                        "artifact",
                        "add",
                        str(many),
                        "--kind",
                        "runtime",
                        "--target",
                        "any",
                        "--name",
                        "bench-many",
                        "--replace",
                    ],
                    env,
                )
                run([*ssh, "mkdir -p bench-many"], env)
                tools = {
                    "ssh edgelab push": (
                        f"{el} store rm orin-agx bench-many",
                        [edgelab, "push", "bench-many", "-d", "orin-agx"],
                    ),
                    "ssh rsync -r": (
                        f"{ssh_s} rm -rf bench-many",
                        ["rsync", "-r", "-e", f"ssh -F {cfg}", f"{many}/", "orin-agx:bench-many/"],
                    ),
                    "ssh scp -r": (
                        f"{ssh_s} rm -rf bench-many",
                        ["scp", "-r", "-F", str(cfg), str(many), "orin-agx:bench-many"],
                    ),
                    "adb edgelab push": (
                        f"{el} store rm s25 bench-many",
                        [edgelab, "push", "bench-many", "-d", "s25"],
                    ),
                    "adb adb push": (
                        f"{adb_s} shell rm -rf /data/local/tmp/bench-many",
                        [*adb, "push", str(many), "/data/local/tmp/bench-many"],
                    ),
                }
                times = {k: [] for k in tools}
                for _ in range(rounds):
                    for tool, (reset, cmd) in tools.items():
                        subprocess.run(reset, shell=True, env=env, check=True, capture_output=True)
                        times[tool].append(timed(cmd, env))
                many_times = times
                run([*ssh, "rm -rf bench-many .edgelab/store"], env)
                run([*adb, "shell", "rm -rf /data/local/tmp/bench-many /data/local/tmp/edgelab/store"], env)
        finally:
            stop_adb_lab(adb_state)
            stop_ssh_lab(ssh_state)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    load_after = os.getloadavg()
    print(
        f"\nedgelab push bench: whole commands, VIRTUAL devices on loopback (not real links), "
        f"median of {rounds} interleaved round(s)"
    )
    print(
        f"machine: {os.cpu_count()} CPUs, load average (1/5/15 min) {' '.join(f'{x:.1f}' for x in load_before)} "
        f"before, {' '.join(f'{x:.1f}' for x in load_after)} after: ratios of one run are comparable, "
        f"seconds across runs are not\n"
    )
    for mib, times in results.items():
        size = mib << 20
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{mib} MiB")
        print(f"  {'command':40} {'median s':>9} {'MB/s':>7}   (rounds)")
        for tool, secs in times.items():
            print(
                f"  {tool:40} {med[tool]:9.2f} {size / med[tool] / 1e6:7.1f}   "
                f"({', '.join(f'{s:.2f}' for s in secs)})"
            )
        for dev, how in paths.get(mib, {}).items():
            print(f"  edgelab push to {dev}: {how}")
        print("  ratios, edgelab push throughput / peer's (same run):")
        goals: tuple[tuple[str, str, float | str | None], ...] = (
            ("ssh", "rsync", 0.9),
            ("ssh", "scp", None),
            ("ssh", "scp + ssh sha256sum", None),
            ("adb", "adb push", None),
            ("adb", "adb push + adb shell sha256sum", 1.0),
            ("adb", "adb push + adb shell sha256sum", "sha256sum"),  # a str: the hasher pinned
        )
        for path, peer, goal in goals:
            ours = f"{path} edgelab push" + (f", {goal}" if isinstance(goal, str) else "")
            r = med[f"{path} {peer}"] / med[ours]
            if isinstance(goal, str):
                print(f"    {path}  vs {peer:32} {r:5.2f}x   (edgelab hashing with {goal} too)")
                continue
            verdict = "" if goal is None else f"   goal >= {goal:.1f}x: {'met' if r >= goal else 'NOT met'}"
            print(f"    {path}  vs {peer:32} {r:5.2f}x{verdict}")
        for path in ("ssh", "adb"):
            s = med[f"{path} edgelab re-push unchanged"]
            print(
                f"    {path}  unchanged re-push {s:.2f} s   goal <= 1 s: {'met' if s <= 1.0 else 'NOT met'}"
            )
        print()
    if many_times:
        med = {k: statistics.median(v) for k, v in many_times.items()}
        print(f"{args.files} files of 100 KiB (one artifact; peers copy the directory, unverified)")
        for tool, secs in many_times.items():
            print(f"  {tool:40} {med[tool]:9.2f} s   ({', '.join(f'{x:.2f}' for x in secs)})")
        print("  ratios, peer's time / edgelab push's (same run):")
        for path, peer in (("ssh", "rsync -r"), ("ssh", "scp -r"), ("adb", "adb push")):
            print(f"    {path}  vs {peer:32} {med[f'{path} {peer}'] / med[f'{path} edgelab push']:5.2f}x")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
