"""CLI start-up cost: CPU time of whole ``edgelab`` commands against ``python -c "import typer"``.

CPU time is the child's user + sys (``os.wait4``), which the shared machine's load
disturbs far less than wall time; each figure is the median of ``--repeat`` runs,
all measured in the same run as the peer. Goals (issue 14): ``--help`` <= 2.0x,
``device ls --json`` with 10 devices <= 3.0x.

    python benchmarks/cli_start.py [--repeat 9]
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


def _cpu(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(user+sys CPU seconds, wall seconds) of one run of ``argv``."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else b""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err.decode(errors='replace')}")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--devices", type=int, default=10)
    args = ap.parse_args()
    load_before = os.getloadavg()
    edgelab = shutil.which("edgelab") or str(Path(sys.executable).with_name("edgelab"))
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "EDGELAB_HOME": tmp, "EDGELAB_DB": str(Path(tmp) / "bench.db")}
        env.pop("COLUMNS", None)
        # Like for like: the peer's typer runs from the bytecode pip compiled at install, and so does an
        # installed edgelab. A shell with PYTHONDONTWRITEBYTECODE=1 would leave an editable checkout
        # without .pyc files and make edgelab alone recompile its sources on every run.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for i in range(args.devices):
            subprocess.run(
                [
                    edgelab,
                    "device",
                    "add",
                    f"dev{i:02d}",
                    "--ssh",
                    f"lab@127.0.0.{i + 2}:22",
                    "--tag",
                    "bench",
                ],
                env=env,
                check=True,
                capture_output=True,
            )
        cases = {
            "python -c 'import typer'": [sys.executable, "-c", "import typer"],
            "edgelab --help": [edgelab, "--help"],
            f"edgelab device ls --json ({args.devices} devices)": [edgelab, "device", "ls", "--json"],
        }
        for argv in cases.values():  # warm the page cache and the .pyc files
            _cpu(argv, env)
        cpu: dict[str, list[float]] = {k: [] for k in cases}
        wall: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.repeat):  # interleaved, so load drifts hit every case alike
            for name, argv in cases.items():
                c, w = _cpu(argv, env)
                cpu[name].append(c)
                wall[name].append(w)
    peer = statistics.median(cpu["python -c 'import typer'"])
    goals = {"edgelab --help": 2.0}
    print(
        f"CPU time (user+sys), median of {args.repeat}, peer = python -c 'import typer'; "
        f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}"
    )
    for name in cases:
        med = statistics.median(cpu[name])
        goal = goals.get(name, 3.0 if name.startswith("edgelab device") else None)
        verdict = (
            "" if goal is None else f"  goal <= {goal:.1f}x: {'met' if med / peer <= goal else 'NOT met'}"
        )
        print(
            f"  {name:<40} cpu {med:6.3f} s  wall {statistics.median(wall[name]):6.3f} s  "
            f"{med / peer:5.2f}x{verdict}"
        )


if __name__ == "__main__":
    main()
