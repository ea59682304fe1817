"""Parity of one exported head across runtimes: same conditioning, same fixed noise, same K steps.

The oracle is ONNX's own numpy evaluation of the exported graph (``onnx.reference``), the
graph's definition rather than any runtime. Each runtime's action chunk is compared with it by
max-abs error and per-dimension RMS error (RMS over the horizon, per action dimension; the
worst dimension is reported), against tolerances stated in the report. An fp32 graph on a CPU
differs by accumulation order only (~1e-6 per step); the tolerances leave room for fp16
backends on a real device without hiding a wrong graph (a wrong weight gives errors ~1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

TOL_MAX_ABS = 1e-3
TOL_RMS = 1e-4
CHUNKS = 3


class OnnxReference:
    """The graph evaluated by onnx.reference (numpy); the same run() as the runtime adapters."""

    runtime = "onnx.reference"

    def __init__(self, path):
        from onnx.reference import ReferenceEvaluator

        self._ev = ReferenceEvaluator(str(path))

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        return self._ev.run(None, feeds)[0]

    def close(self) -> None:
        self._ev = None


def compare(got: np.ndarray, ref: np.ndarray) -> dict[str, Any]:
    err = got.astype(np.float64) - ref.astype(np.float64)
    rms = np.sqrt(np.mean(err**2, axis=0))  # per action dimension, over the horizon
    out = {
        "max_abs": float(np.abs(err).max()),
        "rms_per_dim_max": float(rms.max()),
        "rms_per_dim": [float(x) for x in rms],
    }
    out["ok"] = out["max_abs"] <= TOL_MAX_ABS and out["rms_per_dim_max"] <= TOL_RMS
    return out


def parity_report(
    stage: str = "action-head",
    *,
    seed: int = 0,
    chunks: int = CHUNKS,
    runtimes: tuple[str, ...] = ("mnn", "onnxruntime"),
) -> dict[str, Any]:
    """Chunks from each runtime vs the numpy oracle; ``ok`` only when every runtime is within tolerance."""
    from edgelab.controller.engine import FORMATS
    from edgelab.controller.engines import open_engine
    from edgelab.controller.vla import FlowSampler, noise_for
    from edgelab.models.export import export
    from edgelab.reference.vla import ObservationEncoder, synthetic_observation

    if stage != "action-head":
        raise ValueError(f"parity is defined for the action head, not {stage!r}")
    onnx_file = export(stage, "onnx", seed=seed)
    cond = ObservationEncoder(seed).encode(synthetic_observation(np.random.default_rng(seed)))
    noises = [noise_for(seed, i) for i in range(chunks)]
    oracle = FlowSampler(OnnxReference(onnx_file.path))
    ref = [oracle.sample(cond, n) for n in noises]
    report: dict[str, Any] = {
        "stage": stage,
        "oracle": "onnx.reference (numpy) on " + onnx_file.artifact,
        "oracle_sha256": onnx_file.sha256,
        "noise": f"seeded: seed {seed}, chunks 0..{chunks - 1}",
        "tolerance": {"max_abs": TOL_MAX_ABS, "rms_per_dim": TOL_RMS},
        "where": "lab host CPU",
        "runtimes": {},
    }
    for rt in runtimes:
        ex = export(stage, FORMATS[rt], seed=seed)
        eng = open_engine(rt, ex.path, backend="cpu", threads=1)
        try:
            sampler = FlowSampler(eng)
            per = [compare(sampler.sample(cond, n), r) for n, r in zip(noises, ref, strict=True)]
        finally:
            eng.close()
        worst = max(per, key=lambda c: c["max_abs"])
        report["runtimes"][rt] = {
            "artifact": ex.artifact,
            "sha256": ex.sha256,
            "placement": eng.placement.as_dict(),
            "max_abs": worst["max_abs"],
            "rms_per_dim_max": max(c["rms_per_dim_max"] for c in per),
            "ok": all(c["ok"] for c in per),
        }
    report["ok"] = all(r["ok"] for r in report["runtimes"].values())
    return report


def run_isolated(stage: str = "action-head", *, seed: int = 0, timeout: float = 300.0) -> dict[str, Any]:
    """``parity_report`` in a child process: MNN prints to the process's stdout at import, which
    must not reach a caller's ``--json`` output; a runtime crash must not take the caller down."""
    import json
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "edgelab.models.parity", stage, "--seed", str(seed)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if p.returncode != 0:
        return {
            "stage": stage,
            "ok": False,
            "error": f"parity check exited {p.returncode}: {p.stderr.strip()[-400:]}",
        }
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import os
    import sys

    from edgelab import logs

    ap = argparse.ArgumentParser(prog="python -m edgelab.models.parity", description=__doc__)
    logs.add_argument(ap)
    ap.add_argument("stage", nargs="?", default="action-head")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    logs.setup(a.log_level)
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the runtimes' own prints go to stderr
    rep = parity_report(a.stage, seed=a.seed)
    out.write(json.dumps(rep, separators=(",", ":")) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
