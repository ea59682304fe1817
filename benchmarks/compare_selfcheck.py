#!/usr/bin/env python3
"""Is `runs compare` right? Its own false-alarm and detection rates, measured on the virtual lab.

One run on a private virtual lab (a real sshd, orin-agx, a temporary database), the reference TTS
workload (random weights: machinery figures, never a model's), everything through edgelab's own
bench, store and comparison code:

1. **Pools.** Three configurations measured interleaved (ABBA blocks, one lease): A and A2 (the same
   configuration twice) and B, a planted 10 % slowdown (the talker paced at 25/1.1 frames/s instead
   of 25, i.e. a sleep 10 % longer per frame). ``--pool`` measured requests each.
2. **A/A.** ``--reps`` seeded repetitions draw n = 20 per side from the pools of A and A2 and compare
   them at the stated confidence: the share that says "no difference" (goal >= 95 %).
3. **Planted 10 %.** The same with A against B: the share judged "slower" (goal >= 95 %). The pace
   sets RTF and the request's wall time (+10 %); TTFA, the first two frames and one decoder pass,
   barely moves (its measured B/A is printed beside it), so its row is no detection test.
4. **Smallest detectable difference** at n = 20: A2's real values scaled by 1 + d against A; the
   smallest d (in 1 % steps) flagged slower in >= 95 % of the repetitions.
5. **Interleaving against drift.** The same A/A (unpaced, so CPU-bound) measured back to back (all of A,
   then all of A2) and interleaved, with ``--hog`` busy processes started halfway through each pass:
   how far each pass's A2/A ratio (of the means; the medians beside them) moves from 1. The peer
   is the back-to-back pass.

    python benchmarks/compare_selfcheck.py [--pool 100] [--reps 200] [--hog 2] [--confidence 0.99]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgelab.bench import BenchRequest  # noqa: E402
from edgelab.bench.sweep import Point, run_points  # noqa: E402
from edgelab.deploy.options import Options  # noqa: E402
from edgelab.inventory.probe import probe_devices  # noqa: E402
from edgelab.metrics import compare as cmp  # noqa: E402
from edgelab.metrics.runsets import run_values  # noqa: E402
from edgelab.sim.lab import LabStatus, register  # noqa: E402
from edgelab.sim.sshd import free_port, start_ssh_lab, stop_ssh_lab  # noqa: E402
from edgelab.store.db import get_engine, session_scope  # noqa: E402
from edgelab.store.runs import get_run  # noqa: E402

METRICS = ("rtf_streamed", "request_wall", "ttfa")
N = 20


def values(engine, run_id: str) -> dict[str, list[float]]:
    with session_scope(engine, write=False) as s:
        return run_values(s, get_run(s, run_id))


def rate(a, b, verdict: str, reps: int, confidence: float, metric: str, scale: float = 1.0) -> float:
    rng = np.random.default_rng(12345)
    m = cmp.metric(metric)
    hits = 0
    for i in range(reps):
        xa = rng.choice(a, N, replace=False)
        xb = rng.choice(b, N, replace=False) * scale
        hits += (
            cmp.compare_values(m, xa, xb, confidence=confidence, seed=i, resamples=2000).verdict == verdict
        )
    return hits / reps


def smallest(a, b, reps: int, confidence: float, metric: str) -> int | None:
    for pct in range(1, 31):
        if rate(a, b, "slower", reps, confidence, metric, scale=1 + pct / 100) >= 0.95:
            return pct
    return None


def hog_pass(engine, opts, order: str, hog: int, pool: int, block: int) -> dict[str, tuple[float, float]]:
    """A/A unpaced, with ``hog`` busy processes from halfway through the pass: A2/A ratios of the
    means and of the medians. With half of the requests under the hog a median sits on the edge
    between the two clusters, so the mean is the steadier figure here."""
    base = BenchRequest(
        "orin-agx", "qwen3-tts", runtime="reference", requests=pool, frames=6, frames_per_s=0.0
    )
    points = [Point("A", {}), Point("A2", {})]
    total = 2 * ((pool + block - 1) // block)
    hogs: list[subprocess.Popen] = []
    seen = [0]

    def on_block(*_a) -> None:
        seen[0] += 1
        if seen[0] == total // 2 and hog:
            hogs.extend(subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hog))

    try:
        res = run_points(engine, base, points, block=block, order=order, opts=opts, on_block=on_block)
    finally:
        for p in hogs:
            p.kill()
            p.wait()
    va, vb = values(engine, res.points[0].run_id), values(engine, res.points[1].run_id)
    return {
        m: (float(np.mean(vb[m]) / np.mean(va[m])), float(np.median(vb[m]) / np.median(va[m])))
        for m in ("ttfa", "request_wall")
    }


def rates(engine, opts, args, t0: float) -> None:
    """Sections 1-4: the pools, then the A/A, planted and smallest-difference rates."""
    base = BenchRequest("orin-agx", "qwen3-tts", runtime="reference", requests=args.pool, frames=8)
    planted = f"{25 / 1.1:.4f}"
    print(f"pools: A, A2 (same), B (frames_per_s {planted} vs 25: +10 % per frame), "
          f"{args.pool} requests each, interleaved in blocks of 10 ...", flush=True)  # fmt: skip
    res = run_points(
        engine,
        base,
        [Point("A", {}), Point("A2", {}), Point("B", {"frames_per_s": planted})],
        block=10,
        opts=opts,
    )
    pools = {p.point.label: values(engine, p.run_id) for p in res.points}
    print(f"  ({time.monotonic() - t0:.0f} s; virtual device, reference runtime, random weights)")
    print(f"\nconfidence {args.confidence:.0%}, n = {N} per side, {args.reps} seeded repetitions")
    print(f"{'metric':14} {'A/A no difference':>18} {'planted slower':>15} {'measured B/A':>13}"
          f" {'smallest detected':>18}")  # fmt: skip
    for m in METRICS:
        a, a2, b = (np.asarray(pools[k][m]) for k in ("A", "A2", "B"))
        aa = rate(a, a2, cmp.SAME, args.reps, args.confidence, m)
        ab = rate(a, b, cmp.SLOWER, args.reps, args.confidence, m)
        sd = smallest(a, a2, args.reps, args.confidence, m)
        true = np.median(b) / np.median(a)
        print(f"{m:14} {aa:>17.1%} {ab:>14.1%} {true:>13.3f} {(f'{sd} %' if sd else '> 30 %'):>18}")


def drift(engine, opts, args) -> None:
    """Section 5: back to back (the peer) against interleaved, a CPU hog from halfway."""
    print(
        f"\ndrift: A/A unpaced (CPU-bound), {args.hog_pool} requests a side in blocks of {args.hog_block}, "
        f"{args.hog} busy processes from halfway through each pass",
        flush=True,
    )
    b2b = hog_pass(engine, opts, "back-to-back", args.hog, args.hog_pool, args.hog_block)
    inter = hog_pass(engine, opts, "interleaved", args.hog, args.hog_pool, args.hog_block)
    print(f"{'metric':14} {'A2/A of means: back-to-back':>28} {'interleaved':>12} {'moved b2b/int':>14}"
          f" {'A2/A of medians: b2b':>21} {'interleaved':>12}")  # fmt: skip
    for m in ("ttfa", "request_wall"):
        (bm, bmed), (im, imed) = b2b[m], inter[m]
        moved = abs(bm - 1) / abs(im - 1) if abs(im - 1) > 1e-9 else float("inf")
        print(f"{m:14} {bm:>28.3f} {im:>12.3f} {moved:>13.1f}x {bmed:>21.3f} {imed:>12.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pool", type=int, default=100, help="measured requests per configuration (>= 20)")
    ap.add_argument("--reps", type=int, default=200, help="seeded repetitions per rate")
    ap.add_argument("--confidence", type=float, default=cmp.DEFAULT_CONFIDENCE)
    ap.add_argument("--hog", type=int, default=2, help="busy processes started halfway (0: no drift pass)")
    ap.add_argument("--hog-pool", type=int, default=40, help="measured requests per side in the drift passes")
    ap.add_argument(
        "--hog-block", type=int, default=1, help="requests per block in the drift passes (1: alternate each)"
    )
    ap.add_argument("--drift-only", action="store_true", help="skip the pools and rates")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="edgelab-selfcheck-"))
    os.environ["EDGELAB_HOME"] = str(tmp / "home")
    state = tmp / "lab"
    t0 = time.monotonic()
    info = start_ssh_lab(state, port=free_port(["127.0.0.11", "127.0.0.16"]))
    try:
        url = f"sqlite:///{tmp / 'lab.db'}"
        register(url, LabStatus(state, ssh=info, adb=None), check=False)
        engine = get_engine(url)
        ok = probe_devices(engine, ["orin-agx"], timeout=60, ssh_config=str(info.ssh_config_path))
        assert all(o.ok for o in ok), [o.error for o in ok]
        opts = Options(transport={"ssh_config": str(info.ssh_config_path), "timeout": 30})
        if not args.drift_only:
            rates(engine, opts, args, t0)
        if args.hog:
            drift(engine, opts, args)
    finally:
        stop_ssh_lab(state)
    print(f"\n{time.monotonic() - t0:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
