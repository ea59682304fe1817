"""``python -m edgelab.reference tts|vla ...``: the reference workloads as device processes.

Prints edgelab events as JSON lines on stdout (one flush per line); the deploy layer launches
this on virtual devices, where it really runs. Exit 0 when every request succeeded.
"""

from __future__ import annotations

import os

# A paced workload waits most of the time. OpenBLAS' worker threads busy-wait (sched_yield) between
# the small matmuls of each frame, which burned 0.2 CPU-s per produced audio second (7x the work
# itself); one BLAS thread does these 64-wide products as fast, and the process then sleeps while it
# waits for its pace. Set before numpy is imported; an operator's own setting wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402 - after the BLAS thread settings
import sys  # noqa: E402

from edgelab import logs  # noqa: E402
from edgelab.errors import EdgelabError  # noqa: E402
from edgelab.reference.emit import Emitter  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m edgelab.reference", description=__doc__)
    logs.add_argument(p)
    sub = p.add_subparsers(dest="workload", required=True)

    t = sub.add_parser("tts", help="qwen3-tts: talker + code2wav, streamed on a chunk schedule")
    t.add_argument(
        "--frames-per-s", type=float, default=25.0, help="talker speed (12.5 = real time; 0 = unpaced)"
    )
    t.add_argument("--schedule", default="ramp", help="'ramp' (2,4,8,16,25), 'server' (1 then 25) or '2,4,8'")
    t.add_argument(
        "--text", action="append", help="request text (repeat for several; default: the band's text)"
    )
    t.add_argument("--band", default="short", choices=["short", "medium", "long"])
    t.add_argument("--requests", type=int, default=1, help="measured requests")
    t.add_argument("--warmup", type=int, default=0, help="warm-up requests before the measured ones")
    t.add_argument(
        "--frames", type=int, default=None, help="codec frames per request (default: from the text)"
    )

    t.add_argument(
        "--server",
        default=None,
        help="S4: the talker's server (ws://HOST:PORT); this process runs only the device stages",
    )
    t.add_argument("--stages", default="code2wav", help="S4: the stages this device runs (comma-separated)")

    v = sub.add_parser("vla", help="internvla-a1: flow-matching action head in a fixed-rate control loop")
    v.add_argument("--control-hz", type=float, default=10.0)
    v.add_argument("--steps", type=int, default=50, help="control ticks (inferences)")
    v.add_argument("--warmup", type=int, default=0, help="of those, warm-up ticks (phase warmup) first")
    v.add_argument(
        "--slow-every", type=int, default=0, help="inject a slow step every N inferences (0 = never)"
    )
    v.add_argument("--slow-ms", type=float, default=0.0, help="length of the injected slow step")
    v.add_argument("--horizon", type=int, default=50)
    v.add_argument("--dims", type=int, default=32)
    v.add_argument("--flow-steps", type=int, default=10)

    v.add_argument(
        "--server", default=None, help="S4: the re-planning server (recorded; never in the control loop)"
    )
    v.add_argument("--stages", default=None, help="S4: the stages this device runs")

    for sp in (t, v):
        sp.add_argument("--seed", type=int, default=0)
        sp.add_argument("--run", default=None, help="run id stamped on every event")
        sp.add_argument("--device", default=None, help="device name stamped on run.start")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logs.setup(args.log_level)
    em = Emitter(sys.stdout, run=args.run)
    try:
        if args.workload == "tts" and args.server:
            from edgelab.reference.tts_run import run_tts_device_stage

            return (
                1
                if run_tts_device_stage(
                    em,
                    server=args.server,
                    texts=args.text,
                    band=args.band,
                    requests=args.requests,
                    warmup=args.warmup,
                    seed=args.seed,
                    device=args.device,
                    stages=args.stages.split(","),
                )
                else 0
            )
        if args.workload == "tts":
            from edgelab.reference.tts_run import run_tts

            failed = run_tts(
                em,
                texts=args.text,
                band=args.band,
                requests=args.requests,
                warmup=args.warmup,
                frames_per_s=args.frames_per_s or None,
                schedule=args.schedule,
                seed=args.seed,
                n_frames=args.frames,
                device=args.device,
            )
            return 1 if failed else 0
        from edgelab.reference.vla_run import run_vla

        run_vla(
            em,
            control_hz=args.control_hz,
            steps=args.steps,
            slow_every=args.slow_every,
            slow_ms=args.slow_ms,
            seed=args.seed,
            horizon=args.horizon,
            dims=args.dims,
            flow_steps=args.flow_steps,
            device=args.device,
            warmup=args.warmup,
        )
        return 0
    except EdgelabError as err:
        print(f"error: {err}", file=sys.stderr)
        if err.remedy:
            print(f"  -> {err.remedy}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the lab stopped reading: stop quietly
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
