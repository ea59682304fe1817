"""`edgelab runs import` on a large study file: peak memory and time, against a bare streaming read.

Writes a ``requests.jsonl`` of the study's shape (``--mb``, default 50: requests of ``--chunks``
audio chunks each, every chunk with its SHA-256), then runs, each as its own child process:

- the peer: ``python`` reading the same file line by line with ``json.loads`` and nothing else
  (the floor any import of JSON lines pays);
- ``edgelab runs import`` of it into a fresh SQLite database.

Prints each one's peak RSS (the child's own ``ru_maxrss``, from ``wait4``) and wall time, and the
ratios edgelab / peer. The goal of issue 27: under 200 MB peak for a 50 MB file.

    python benchmarks/import_memory.py [--mb 50] [--chunks 150] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PEER = r"""
import json, sys
n = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        if line.strip():
            n += len(json.loads(line)["chunks_all"])
print(n)
"""


def write_study(path: Path, mb: float, chunks: int) -> tuple[int, int]:
    """A requests.jsonl of about ``mb`` MB; returns (requests, chunks) written."""
    target = int(mb * 1e6)
    written = n_req = n_chunks = 0
    t0 = 1_750_000_000.0
    with path.open("w", encoding="utf-8") as f:
        while written < target:
            sub = t0 + n_req * 10.0
            chunk_list = []
            t = 300.0
            for i in range(chunks):
                t += 80.0 + (i % 7)
                sha = hashlib.sha256(f"{n_req}-{i}".encode()).hexdigest()
                chunk_list.append(
                    {
                        "idx": i,
                        "t_ms": round(t, 3),
                        "samples": 1920,
                        "sr": 24000,
                        "terminal": False,
                        "sha256": sha,
                    }
                )
            rec = {
                "request_id": f"req-{n_req}",
                "phase": "measured",
                "length_band": "long",
                "submitted_unix": sub,
                "finished_unix": sub + t / 1000.0 + 0.05,
                "sr": 24000,
                "chunks_all": chunk_list,
            }
            line = json.dumps(rec) + "\n"
            f.write(line)
            written += len(line.encode())
            n_req += 1
            n_chunks += chunks
    return n_req, n_chunks


def measure(argv: list[str], env: dict[str, str]) -> tuple[int, float, float, str]:
    """(exit code, peak RSS in MB, seconds, stderr tail) of one child."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    took = time.monotonic() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024.0, took, err[-500:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=50.0, help="size of the study file (MB)")
    ap.add_argument("--chunks", type=int, default=150, help="audio chunks per request")
    ap.add_argument("--keep", type=Path, default=None, help="work in this directory and keep it")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="edgelab-import-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        study = work / "study"
        study.mkdir(exist_ok=True)
        req = study / "requests.jsonl"
        n_req, n_chunks = write_study(req, args.mb, args.chunks)
        size_mb = req.stat().st_size / 1e6
        env = {**os.environ, "EDGELAB_DB": f"sqlite:///{work / 'import.db'}", "EDGELAB_DB_CREATE": "1"}
        (work / "import.db").unlink(missing_ok=True)
        peer = measure([sys.executable, "-c", PEER, str(req)], env)
        cli = [sys.executable, "-c", "from edgelab.cli import main; main()"]
        ours = measure([*cli, "runs", "import", str(study), "--json"], env)
        print(f"study file: {size_mb:.1f} MB, {n_req} requests, {n_chunks} chunks")
        print(f"{'':34} {'peak RSS':>10} {'time':>8}")
        print(f"{'peer: json.loads line by line':34} {peer[1]:8.1f} MB {peer[2]:7.1f}s")
        print(f"{'edgelab runs import':34} {ours[1]:8.1f} MB {ours[2]:7.1f}s   exit {ours[0]}")
        print(
            f"ratio edgelab/peer: memory {ours[1] / peer[1]:.2f}x, time {ours[2] / max(peer[2], 1e-9):.2f}x; "
            f"peak RSS / file size {ours[1] / size_mb:.2f}"
        )
        if ours[0] != 0:
            print(ours[3], file=sys.stderr)
        return ours[0]
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
