#!/usr/bin/env python3
"""Does edgelab measure llama.cpp right, and what does measuring cost? One run, ratios printed.

Same binary (the lab host's build), same model (the ~100 M-parameter random-weight Q4_K_M from
``edgelab model synth``), same threads (1, ``OMP_WAIT_POLICY=passive``), llama-server on 127.0.0.1:

(a) agreement
    - edgelab's decode tokens/s (lab clock, SSE arrivals) vs ``llama-bench``'s tg figure for the
      same number of generated tokens (goal: within 10 %); llama-bench runs no sampler, so the
      requests sample greedily (top_k 1); the server's default sampler chain is printed beside;
    - edgelab's TTFT vs the server's own ``prompt_ms`` (goal: within 10 % plus one round trip,
      the round trip measured here as the median ``GET /health``).
(b) overhead
    - the wall time of one request through edgelab's client and event path (stream_completion +
      record_to_events + JSON-lines encoding) vs a bare ``curl -N`` of the same request, each
      against the server's own time for it (``prompt_ms + predicted_ms``); goal: edgelab adds no
      more than 5 % over curl's figure. Requests alternate edgelab / curl.

The model's weights are random: the figures are a real model's of that shape, on a shared 2-core
lab host (noisy; medians of the rounds are printed). Not part of the test suite.

    python benchmarks/llama_agreement.py [--requests 10] [--n-predict 128] [--source PATH] [--bin DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from edgelab.adapters.llama_bench import by_test, parse_bench
from edgelab.adapters.llama_server import record_from_sse, record_to_events, stream_completion, wait_ready
from edgelab.metrics import events as ev

ENV = {**os.environ, "OMP_WAIT_POLICY": "passive"}
# llama-bench measures the forward pass alone; the server's default chain sorts a 32000-token
# vocabulary per token. Greedy top-k 1 is the like-for-like request; the default chain is printed too.
GREEDY = {"samplers": ["top_k"], "top_k": 1}
PROMPT = (
    "The quick brown fox jumps over the lazy dog while the lab measures how fast a small model "
    "reads its prompt and writes its answer, one token at a time."
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bins(args) -> dict[str, Path]:
    if args.bin:
        return {p: Path(args.bin) / p for p in ("llama-server", "llama-bench", "llama-quantize")}
    from edgelab.runtimes import load_runtimes
    from edgelab.runtimes.build import ensure_build
    from edgelab.runtimes.cache import cache_root
    from edgelab.runtimes.source import fetch_sdist

    source = args.source or fetch_sdist("llama-cpp-python==0.3.36", cache_root() / "downloads")
    build = ensure_build(
        load_runtimes()["llama.cpp"],
        "linux-x86_64",
        source=source,
        progress=lambda line: print(f"  [build] {line}", file=sys.stderr),
    )
    return build.products


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=10, help="measured requests per client (after 1 warm-up)")
    ap.add_argument("--n-predict", type=int, default=128)
    ap.add_argument("--source", help="llama.cpp source for the build (default: the llama-cpp-python sdist)")
    ap.add_argument("--bin", help="use the binaries in this folder instead of the recipe's build")
    ap.add_argument(
        "--model", help="GGUF to use (default: edgelab model synth spark-x2.5 --params 100M --quant q4_k_m)"
    )
    args = ap.parse_args(argv)
    if not shutil.which("curl"):
        print("needs curl", file=sys.stderr)
        return 2
    bins = _bins(args)
    if args.model:
        model = Path(args.model)
    else:
        from edgelab.models.synth import synth_files

        model = synth_files("spark-x2.5", "100M", quant="q4_k_m", quantizer=bins["llama-quantize"]).path
    n = args.n_predict
    print(
        f"model {model.name} ({model.stat().st_size / 1e6:.1f} MB, random weights), 1 thread, "
        f"OMP_WAIT_POLICY=passive, {n} tokens per request"
    )

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = tempfile.NamedTemporaryFile("w+", prefix="llama-server-", suffix=".log", delete=False)
    proc = subprocess.Popen(
        [
            str(bins["llama-server"]),
            "-m",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-t",
            "1",
            "-c",
            "2048",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=ENV,
    )
    tg_samples: list[float] = []
    pp_samples: list[float] = []
    ours, ours_default, curls = [], [], []
    try:
        wait_ready(url, 120, alive=lambda: proc.poll() is None)
        with httpx.Client(timeout=300) as client:  # made before any clock starts
            rtts = []
            for _ in range(20):
                t0 = time.perf_counter()
                client.get(url + "/health")
                rtts.append((time.perf_counter() - t0) * 1000)
            rtt = statistics.median(rtts)
            body = {
                "prompt": PROMPT,
                "n_predict": n,
                "stream": True,
                "cache_prompt": False,
                "temperature": 0,
                "ignore_eos": True,
                **GREEDY,
            }
            stream_completion(client, url, PROMPT, n, extra=GREEDY)  # warm-up
            # rounds interleave every measurement, so the shared host's load drifts into all of them alike
            for _ in range(args.requests):
                res = subprocess.run(
                    [
                        str(bins["llama-bench"]),
                        "-m",
                        str(model),
                        "-p",
                        "32",
                        "-n",
                        str(n),
                        "-r",
                        "1",
                        "-t",
                        "1",
                        "-o",
                        "jsonl",
                    ],
                    capture_output=True,
                    text=True,
                    env=ENV,
                    timeout=900,
                )
                if res.returncode != 0:
                    print(res.stderr[-2000:], file=sys.stderr)
                    return 1
                bench = by_test(parse_bench(res.stdout))
                tg_samples.append(bench[f"tg{n}"].avg_ts)
                pp_samples.append(bench["pp32"].avg_ts)
                t0 = time.perf_counter()
                rec = stream_completion(client, url, PROMPT, n, extra=GREEDY)
                lines = [ev.encode(e) for e in record_to_events(rec, "bench", "r", "measured")]
                wall = (time.perf_counter() - t0) * 1000
                assert rec.ok and lines, rec.error
                ours.append((rec, wall))
                t0 = time.perf_counter()
                out = subprocess.run(
                    [
                        "curl",
                        "-s",
                        "-N",
                        "-H",
                        "Content-Type: application/json",
                        "-d",
                        json.dumps(body),
                        url + "/completion",
                    ],
                    capture_output=True,
                    timeout=300,
                )
                cwall = (time.perf_counter() - t0) * 1000
                crec = record_from_sse(out.stdout, "/completion")
                assert crec.timings, out.stdout[-300:]
                curls.append((crec, cwall))
                rec = stream_completion(client, url, PROMPT, n)  # the server's default sampler chain
                assert rec.ok, rec.error
                ours_default.append(rec)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)
        log.close()
    tg = statistics.median(tg_samples)

    def server_ms(rec):
        return rec.timings["prompt_ms"] + rec.timings["predicted_ms"]

    lab_tps = _median([r.metrics()["decode_tok_s"] for r, _ in ours])
    srv_tps = _median([r.timings["predicted_per_second"] for r, _ in ours])
    ttft = _median([r.metrics()["ttft_ms"] for r, _ in ours])
    prompt_ms = _median([r.timings["prompt_ms"] for r, _ in ours])
    our_ratio = _median([w / server_ms(r) for r, w in ours])
    curl_ratio = _median([w / server_ms(r) for r, w in curls])
    our_wall, curl_wall = _median([w for _, w in ours]), _median([w for _, w in curls])
    srv_ours, srv_curl = _median([server_ms(r) for r, _ in ours]), _median([server_ms(r) for r, _ in curls])

    def_tps = _median([r.metrics()["decode_tok_s"] for r in ours_default])
    def_srv = _median([r.timings["predicted_per_second"] for r in ours_default])
    print(
        f"\n(a) agreement (medians of {args.requests} interleaved rounds; requests sample greedily: top_k 1)"
    )
    print(
        f"  decode tokens/s   edgelab (lab clock) {lab_tps:8.1f}   llama-bench tg{n} {tg:8.1f} "
        f"(rounds {min(tg_samples):.0f}-{max(tg_samples):.0f})   ratio {lab_tps / tg:.3f}   "
        f"{'OK' if abs(lab_tps / tg - 1) <= 0.10 else 'OUTSIDE'} (goal within 10 %)"
    )
    print(
        f"                    server predicted_per_second {srv_tps:8.1f}   edgelab/server {lab_tps / srv_tps:.3f}"
    )
    print(
        f"  default sampler chain (top-k 40, top-p, min-p over {n} tokens): edgelab {def_tps:.1f}, server "
        f"{def_srv:.1f}, edgelab/server {def_tps / def_srv:.3f}, vs llama-bench {def_tps / tg:.3f}"
    )
    print(
        f"  TTFT ms           edgelab {ttft:8.2f}   server prompt_ms {prompt_ms:8.2f}   ratio {ttft / prompt_ms:.3f}"
        f"   round trip {rtt:.2f} ms   edgelab - prompt_ms = {ttft - prompt_ms:.2f} ms vs allowance "
        f"{0.10 * prompt_ms + rtt:.2f} ms: {'OK' if ttft - prompt_ms <= 0.10 * prompt_ms + rtt else 'OUTSIDE'}"
    )
    print(
        f"  llama-bench pp32  {statistics.median(pp_samples):8.1f} tokens/s (prompt here: "
        f"{ours[0][0].timings['prompt_n']} tokens)"
    )
    print("\n(b) overhead: wall time of a request / the server's own prompt_ms + predicted_ms")
    print(f"  edgelab client + events {our_wall:8.1f} ms (server {srv_ours:7.1f} ms)   ratio {our_ratio:.4f}")
    print(
        f"  bare curl -N            {curl_wall:8.1f} ms (server {srv_curl:7.1f} ms)   ratio {curl_ratio:.4f}"
    )
    extra = our_ratio - curl_ratio
    print(
        f"  edgelab adds {extra * 100:+.2f} % of the server's time over curl: "
        f"{'OK' if extra <= 0.05 else 'OUTSIDE'} (goal <= 5 %)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
