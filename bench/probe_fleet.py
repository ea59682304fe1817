#!/usr/bin/env python3
"""Probe a fleet of virtual SSH devices three ways and compare wall times.

1. edgelab: ``probe_devices`` (parallel 16): one batched exec per device, parsed, classified, stored.
2. Ansible: ``ansible all -m setup`` (forks 16, host key checking on via the lab's known_hosts).
3. Floor: plain OpenSSH ``ssh`` run 16-wide in parallel with the same batched collection script.

Measured on virtual devices (one real sshd, personas in mount namespaces) on this machine: the
devices' sshd work shares the cores with the client, so compare ratios, not absolute times.
Usage: python bench/probe_fleet.py [--devices 16] [--rounds 3] [--quick]
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


def _edgelab_round(engine, names, ssh_config: str) -> tuple[float, int]:
    from edgelab.probe import probe_devices
    from edgelab.transport.ssh import close_all

    close_all()  # no pooled connection from the previous round: every probe connects afresh
    start = time.monotonic()
    outcomes = probe_devices(engine, names, parallel=16, timeout=60, ssh_config=ssh_config)
    took = time.monotonic() - start
    close_all()
    return took, sum(o.ok for o in outcomes)


def _ssh_round(info, names) -> tuple[float, int]:
    from edgelab.probe.collectors import COLLECTORS, split_sections
    from edgelab.probe.collectors.sections import new_nonce
    from edgelab.transport.quoting import join_posix

    nonce = new_nonce()
    line = join_posix(COLLECTORS["linux"].argv(nonce))
    start = time.monotonic()
    procs = [
        subprocess.Popen(["ssh", "-F", str(info.ssh_config_path), "-o", "BatchMode=yes", n, line],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for n in names
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    took = time.monotonic() - start
    ok = sum(1 for p, (out, _e) in zip(procs, outs, strict=True)
             if p.returncode == 0 and split_sections(out.decode("utf-8", "replace"), nonce)[0])
    return took, ok


def _ansible_files(info, names, work: Path) -> tuple[Path, dict[str, str]]:
    inv = work / "inventory.ini"
    rows = ["[lab]"]
    for n in names:
        d = info.device(n)
        rows.append(f"{n} ansible_host={d.address} ansible_port={d.port} ansible_user={info.user} "
                    f"ansible_ssh_private_key_file={info.client_key_path} ansible_python_interpreter=/usr/bin/python3")
    inv.write_text("\n".join(rows) + "\n")
    cfg = work / "ansible.cfg"
    cfg.write_text(
        "[defaults]\nhost_key_checking = True\nforks = 16\ngathering = explicit\nretry_files_enabled = False\n"
        f"[ssh_connection]\nssh_args = -o UserKnownHostsFile={info.known_hosts_path} -o StrictHostKeyChecking=yes "
        "-o IdentitiesOnly=yes -o ControlMaster=no\npipelining = True\n"
    )
    env = dict(os.environ, ANSIBLE_CONFIG=str(cfg), ANSIBLE_LOCAL_TEMP=str(work / "tmp"),
               ANSIBLE_HOME=str(work / "home"), ANSIBLE_STDOUT_CALLBACK="oneline")
    return inv, env


def _ansible_round(inv: Path, env: dict[str, str], n: int) -> tuple[float, int]:
    start = time.monotonic()
    res = subprocess.run(["ansible", "all", "-i", str(inv), "-m", "setup", "-f", "16"],
                         capture_output=True, text=True, env=env, timeout=600)
    took = time.monotonic() - start
    ok = sum(1 for ln in res.stdout.splitlines() if "| SUCCESS" in ln)
    if ok < n:
        sys.stderr.write(res.stdout[-2000:] + res.stderr[-2000:])
    return took, ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", type=int, default=16, help="virtual SSH devices (orin-agx and clones)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per tool; the median is reported")
    ap.add_argument("--quick", action="store_true", help="2 devices, 1 round (a smoke run)")
    ap.add_argument("--no-ansible", action="store_true", help="skip Ansible (not installed)")
    args = ap.parse_args(argv)
    if args.quick:
        args.devices, args.rounds = 2, 1
    use_ansible = not args.no_ansible and shutil.which("ansible") is not None
    if not args.no_ansible and not use_ansible:
        print("ansible not found (pip install ansible-core): skipping it", file=sys.stderr)

    from edgelab.sim.lab import LabStatus, register
    from edgelab.sim.sshd import clone_address, free_port, start_ssh_lab, stop_ssh_lab
    from edgelab.store.db import get_engine

    work = Path(tempfile.mkdtemp(prefix="edgelab-bench-"))
    state = work / "lab"
    clones = args.devices - 1
    try:
        addrs = ["127.0.0.11"] + [clone_address(i) for i in range(1, clones + 1)]
        info = start_ssh_lab(state, ["orin-agx"], port=free_port(addrs), clones=clones)
        names = [d.name for d in info.devices]
        url = f"sqlite:///{work / 'bench.db'}"
        register(url, LabStatus(state, ssh=info, adb=None), check=False)
        engine = get_engine(url)
        inv, env = _ansible_files(info, names, work) if use_ansible else (None, None)
        results: dict[str, list[tuple[float, int]]] = {"edgelab": [], "ansible": [], "ssh": []}
        for r in range(args.rounds):
            results["edgelab"].append(_edgelab_round(engine, names, str(info.ssh_config_path)))
            results["ssh"].append(_ssh_round(info, names))
            if use_ansible:
                results["ansible"].append(_ansible_round(inv, env, len(names)))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1][0]:.2f}s ({v[-1][1]}/{len(names)} ok)"
                                                 for k, v in results.items() if v), file=sys.stderr)
    finally:
        stop_ssh_lab(state)
        shutil.rmtree(work, ignore_errors=True)

    med = {k: statistics.median(t for t, _ in v) for k, v in results.items() if v}
    n = len(names)
    print(f"probe_fleet: {n} virtual SSH devices (one real sshd, personas in mount namespaces), "
          f"parallel 16, median of {args.rounds} round(s), measured on this {os.cpu_count()}-core machine")
    print(f"  edgelab probe        {med['edgelab']:7.2f} s")
    if "ansible" in med:
        print(f"  ansible -m setup     {med['ansible']:7.2f} s")
    print(f"  parallel ssh floor   {med['ssh']:7.2f} s")
    if "ansible" in med:
        print(f"  ansible / edgelab    {med['ansible'] / med['edgelab']:7.2f} x   (goal >= 5)")
    print(f"  edgelab / ssh floor  {med['edgelab'] / med['ssh']:7.2f} x   (goal <= 1.2)")
    failed = any(ok < n for v in results.values() for _t, ok in v)
    if failed:
        print("  some probes failed: see stderr", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
