"""How far an emulated figure is from a device's: the same llama.cpp tree, the same random-weight
GGUF, llama-bench's prompt (pp) and generation (tg) tokens/s for the aarch64 build under qemu user
mode against the lab host's own x86-64 build (the named peer), and 1 thread against 2 under qemu.

Why it exists: an emulated run (a virtual Jetson or phone running its own build) proves the build
starts, serves and stops like the device's; its speed is the emulator's, which is why every such
figure is labelled ``emulated`` and never compared with a device's, and why an emulated launch gets
one thread (ggml's workers wait for each other at every barrier, which qemu makes costly).

    python benchmarks/emulated.py [--params 4M] [--tokens 16]
"""

from __future__ import annotations

import argparse
import json
import subprocess

from edgelab.models.synth import synth_files
from edgelab.runtimes import load_runtimes
from edgelab.runtimes.build import ensure_build
from edgelab.runtimes.emulation import QEMU


def bench(argv: list[str], model: str, tokens: int, threads: int) -> dict[str, float]:
    cmd = [
        *argv,
        "-m",
        model,
        "-p",
        str(tokens),
        "-n",
        str(tokens),
        "-r",
        "2",
        "-t",
        str(threads),
        "-o",
        "jsonl",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {("pp" if r["n_prompt"] else "tg"): float(r["avg_ts"]) for r in rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="4M", help="random-weight model size (edgelab model synth)")
    ap.add_argument("--tokens", type=int, default=16, help="prompt and generated tokens per test")
    args = ap.parse_args()
    spec = load_runtimes()["llama.cpp"]
    native = ensure_build(spec, "linux-x86_64").products["llama-bench"]
    arm = ensure_build(spec, "linux-aarch64").products["llama-bench"]
    model = str(synth_files("spark-x2.5", args.params, seed=0).path)
    peer = bench([str(native)], model, args.tokens, 1)
    emu1 = bench([QEMU["aarch64"], str(arm)], model, args.tokens, 1)
    emu2 = bench([QEMU["aarch64"], str(arm)], model, args.tokens, 2)
    print(f"llama-bench, {args.params} random-weight GGUF, {args.tokens} tokens, tokens/s (higher is faster)")
    for test in ("pp", "tg"):
        print(
            f"  {test}: lab host x86-64 (peer, 1 thread) {peer[test]:8.1f} | aarch64 under qemu 1 thread "
            f"{emu1[test]:7.1f} ({emu1[test] / peer[test]:.4f} x peer) | 2 threads {emu2[test]:7.1f} "
            f"({emu2[test] / emu1[test]:.2f} x 1 thread)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
