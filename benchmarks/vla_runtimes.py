#!/usr/bin/env python3
"""The action head on MNN and ONNX Runtime: edgelab's S3 controller vs a bare loop, clean and with a CPU hog.

One run, on this lab host's CPU (the head has random weights: these are machinery figures, never a
model's). For each runtime, interleaved rounds of:

- **bare loop** (the peer): the runtime called directly, K = 10 Euler steps per chunk, paced at the
  control rate, no controller, no events;
- **controller**: edgelab's S3 controller (inference thread, chunk buffer, control thread) emitting
  its JSON-lines events to a file, at the same rate and on the same noise.

Per-step and per-chunk p50/p95 for both; the ratio controller / bare at p50 is the controller and
event path's cost (goal <= 1.05; "cycle" adds buffer publish and event writes to the head's time).
Then 10 Hz episodes clean and with ``--hog`` busy processes beside the loop: deadline misses (chunk
older than one period) and observation-to-action age. On a shared 2-core box a single round can be
off either way; the median of the rounds is printed.

    python benchmarks/vla_runtimes.py [--rounds 3] [--chunks 20] [--hog 2] [--hz 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgelab.controller.engine import FORMATS  # noqa: E402
from edgelab.controller.engines import open_engine  # noqa: E402
from edgelab.controller.vla import FlowSampler, VlaController, noise_for  # noqa: E402
from edgelab.metrics.action import ActionSample, action_metrics  # noqa: E402
from edgelab.metrics.stats import summarize  # noqa: E402
from edgelab.models.export import export  # noqa: E402
from edgelab.reference.emit import Emitter  # noqa: E402
from edgelab.reference.vla import ObservationEncoder, synthetic_observation  # noqa: E402

K = 10


def bare_loop(engine, cond: np.ndarray, chunks: int, period: float) -> tuple[list[float], list[float]]:
    """The runtime called directly: (per-step ms, per-chunk ms), paced like the controller."""
    steps, per_chunk = [], []
    cond = cond.reshape(1, -1).astype(np.float32)
    t0 = time.monotonic()
    for i in range(chunks):
        due = t0 + i * period
        if due > time.monotonic():
            time.sleep(due - time.monotonic())
        x = noise_for(0, i)
        c0 = time.perf_counter()
        for k in range(K):
            s0 = time.perf_counter()
            v = engine.run({"cond": cond, "x": x, "tau": np.array([k / K], np.float32)})
            steps.append((time.perf_counter() - s0) * 1000.0)
            x = x + v / K
        per_chunk.append((time.perf_counter() - c0) * 1000.0)
    return steps, per_chunk


def controller_episode(engine, ticks: int, hz: float, events: Path, hog: int = 0) -> VlaController:
    from edgelab.controller.vla import CpuHog

    with open(events, "w", buffering=1) as f:
        ctl = VlaController(
            Emitter(f, run="bench", stamp={"runtime": engine.runtime, "weights": "random"}),
            engine,
            control_hz=hz,
            seed=0,
        )
        ctl.warmup(1)
        ctl.wall0, ctl.mono0 = time.time(), time.monotonic()
        with CpuHog(hog):
            ctl.run(ticks, "bench-episode")
    return ctl


def action_figures(events: Path, period: float) -> dict:
    rows = [json.loads(x) for x in events.read_text().splitlines()]
    samples = [
        ActionSample(
            t=r["t"],
            obs_t=r["obs_t"],
            infer_start=r["infer_start"],
            infer_end=r["infer_end"],
            horizon=r["horizon"],
        )
        for r in rows
        if r["kind"] == "action.chunk"
    ]
    return action_metrics(samples, period)


def p(d: dict) -> str:
    return f"p50 {d['p50']:7.2f}  p95 {d['p95']:7.2f}  (n={d['count']})" if d.get("count") else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chunks", type=int, default=20)
    ap.add_argument("--hz", type=float, default=10.0)
    ap.add_argument("--hog", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    period = 1.0 / a.hz
    home = tempfile.mkdtemp(prefix="edgelab-vla-bench-")
    os.environ.setdefault("EDGELAB_HOME", home)
    cond = ObservationEncoder(0).encode(synthetic_observation(np.random.default_rng(0)))
    out: dict = {
        "host_cpus": os.cpu_count(),
        "hz": a.hz,
        "rounds": a.rounds,
        "chunks": a.chunks,
        "threads": a.threads,
        "weights": "random",
        "runtimes": {},
    }
    for rt in ("mnn", "onnxruntime"):
        model = export("action-head", FORMATS[rt])
        eng = open_engine(rt, model.path, backend="cpu", threads=a.threads)
        FlowSampler(eng).sample(cond, noise_for(0, 999))  # warm
        bare_steps, bare_chunks, ctl_steps, ctl_chunks, ctl_cycles, ratios = [], [], [], [], [], []
        for _round in range(a.rounds):  # interleaved: the machine's load drifts
            s, c = bare_loop(eng, cond, a.chunks, period)
            with tempfile.TemporaryDirectory() as d:
                ctl = controller_episode(eng, a.chunks, a.hz, Path(d) / "events.jsonl")
            bare_steps += s
            bare_chunks += c
            ctl_steps += ctl.sampler.step_ms
            ctl_chunks += ctl.infer_ms
            ctl_cycles += ctl.cycle_ms
            ratios.append(statistics.median(ctl.cycle_ms) / statistics.median(c))
        with tempfile.TemporaryDirectory() as d:
            clean = controller_episode(eng, a.chunks * 2, a.hz, Path(d) / "e.jsonl")
            clean_fig = action_figures(Path(d) / "e.jsonl", period)
            hogged = controller_episode(eng, a.chunks * 2, a.hz, Path(d) / "h.jsonl", hog=a.hog)
            hog_fig = action_figures(Path(d) / "h.jsonl", period)
        out["runtimes"][rt] = {
            "model_sha256": model.sha256,
            "placement": eng.placement.as_dict(),
            "bare": {"step_ms": summarize(bare_steps), "chunk_ms": summarize(bare_chunks)},
            "controller": {
                "step_ms": summarize(ctl_steps),
                "chunk_ms": summarize(ctl_chunks),
                "cycle_ms": summarize(ctl_cycles),
            },
            "ratio_p50": {
                "chunk": statistics.median(ctl_chunks) / statistics.median(bare_chunks),
                "cycle": statistics.median(ctl_cycles) / statistics.median(bare_chunks),
                "cycle_per_round": ratios,
            },
            "at_hz": {
                "clean": {**clean_fig, "held_ticks": clean.stats.held},
                f"hog{a.hog}": {**hog_fig, "held_ticks": hogged.stats.held},
            },
        }
    if a.json:
        print(json.dumps(out, indent=1))
        return 0
    print(
        f"action head (random weights) on this host's CPU ({out['host_cpus']} cpus, {a.threads} thread), "
        f"{a.rounds} interleaved rounds x {a.chunks} chunks at {a.hz:g} Hz; K = {K} steps per chunk"
    )
    for rt, r in out["runtimes"].items():
        pl = r["placement"]
        print(f"\n== {rt} {pl['runtime_version']}  placement {pl['observed']} ({pl['detail'][:70]})")
        print(f"  model sha256 {r['model_sha256']}")
        print(f"  bare loop   step ms  {p(r['bare']['step_ms'])}")
        print(f"  controller  step ms  {p(r['controller']['step_ms'])}")
        print(f"  bare loop   chunk ms {p(r['bare']['chunk_ms'])}")
        print(f"  controller  chunk ms {p(r['controller']['chunk_ms'])}")
        print(f"  controller  cycle ms {p(r['controller']['cycle_ms'])}   (head + buffer + events)")
        rr = r["ratio_p50"]
        print(
            f"  controller / bare at p50: chunk {rr['chunk']:.3f}  cycle {rr['cycle']:.3f}  "
            f"(per round {', '.join(f'{x:.3f}' for x in rr['cycle_per_round'])}; goal <= 1.05)"
        )
        for name, f in r["at_hz"].items():
            print(
                f"  {a.hz:g} Hz {name:6s} latency {p(f['latency_ms'])}  age {p(f['age_ms'])}  "
                f"misses {f['deadline_misses']}/{f['chunks']}  aligned {f['stale_aligned']}  "
                f"dropped {f['stale_dropped']}  held ticks {f['held_ticks']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
