"""``python -m edgelab.controller vla ...``: the S3 controller as a device process.

Events go out as JSON lines on the process's stdout; the runtimes' own C-level prints (MNN
writes to stdout) are moved to stderr first, so the event stream stays clean. Exit 0 when the
episode finished, 1 when it failed, 2 on a usage or setup error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from edgelab import logs
from edgelab.errors import EdgelabError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m edgelab.controller", description=__doc__)
    logs.add_argument(p)
    sub = p.add_subparsers(dest="workload", required=True)
    v = sub.add_parser("vla", help="action head on a runtime in a fixed-rate control loop")
    v.add_argument("--runtime", required=True, choices=["mnn", "onnxruntime"])
    v.add_argument("--model", required=True, type=Path, help="the exported head (.mnn or .onnx)")
    v.add_argument("--backend", default="cpu", help="requested backend (cpu, cuda, opencl, qnn, ...)")
    v.add_argument("--strict-placement", action="store_true", help="fail instead of falling back to the CPU")
    v.add_argument("--threads", type=int, default=1)
    v.add_argument("--control-hz", type=float, default=10.0)
    v.add_argument("--steps", type=int, default=50, help="control ticks")
    v.add_argument("--warmup", type=int, default=1, help="of the chunks, the first are warm-up requests")
    v.add_argument("--staleness-ms", type=float, default=None, help="staleness bound (default: one period)")
    v.add_argument("--hog", type=int, default=0, help="fault injection: N busy CPU processes during the run")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--run", default=None)
    v.add_argument("--device", default=None)
    c = sub.add_parser("codec", help="Qwen3-TTS code2wav on a runtime, fed by a codec-token server (S4)")
    c.add_argument("--runtime", required=True, choices=["mnn", "onnxruntime"])
    c.add_argument("--model", required=True, type=Path, help="the exported decoder (.mnn or .onnx)")
    c.add_argument("--server", required=True, help="ws://HOST:PORT of the codec-token server")
    c.add_argument("--backend", default="cpu")
    c.add_argument("--strict-placement", action="store_true")
    c.add_argument("--threads", type=int, default=1)
    c.add_argument("--text", action="append", help="segment text (repeat for several)")
    c.add_argument("--requests", type=int, default=1)
    c.add_argument("--warmup", type=int, default=0)
    c.add_argument("--run", default=None)
    c.add_argument("--device", default=None)
    return p


def _event_stream():
    """A private dup of stdout for events; fd 1 then points at stderr for everything else."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(fd, "w", buffering=1)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logs.setup(args.log_level)
    from edgelab.controller.engines import open_engine
    from edgelab.controller.vla import run_episode
    from edgelab.reference.emit import Emitter

    stream = _event_stream()
    em = Emitter(stream, run=args.run, stamp={"runtime": args.runtime, "weights": "random"})
    try:
        engine = open_engine(
            args.runtime, args.model, backend=args.backend, threads=args.threads, strict=args.strict_placement
        )
        if args.workload == "codec":
            from edgelab.controller.codec import run_codec
            from edgelab.reference.tts import BAND_TEXTS

            ok = run_codec(
                em,
                engine,
                model=args.model,
                url=args.server,
                texts=args.text or [BAND_TEXTS["short"]],
                requests=args.requests,
                warmup=args.warmup,
                device=args.device,
            )
            return 0 if ok else 1
        if hasattr(engine, "profile_nodes"):  # ONNX Runtime: which provider ran each node, once at load
            import numpy as np

            from edgelab.controller.vla import noise_for

            engine.profile_nodes(
                {"cond": np.zeros((1, 128), np.float32), "x": noise_for(0, 0), "tau": np.zeros(1, np.float32)}
            )
        ok, _summary = run_episode(
            em,
            engine,
            model=args.model,
            control_hz=args.control_hz,
            ticks=args.steps,
            warmup=args.warmup,
            seed=args.seed,
            device=args.device,
            hog=args.hog,
            staleness_s=None if args.staleness_ms is None else args.staleness_ms / 1000.0,
            extra_meta={"threads": args.threads, "backend_requested": args.backend},
        )
        return 0 if ok else 1
    except EdgelabError as err:
        print(f"error: {err}", file=sys.stderr)
        if err.remedy:
            print(f"  -> {err.remedy}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
