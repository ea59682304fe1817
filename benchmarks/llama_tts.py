#!/usr/bin/env python3
"""Qwen3-TTS on llama.cpp: what streaming (S3) buys over the baseline (S5), and what edgelab costs.

Same build (the lab host's), same random-weight model (``edgelab model synth qwen3-tts-0.6b``,
``--scale`` shrinks it), same text, frames, seed and threads; every round runs each program once,
interleaved, so the shared host's load drifts into all of them alike (medians printed):

(a) S3 against S5
    - S3's time to first audio (edgelab's controller, its first chunk on the edge ramp 2,4,8,16,25
      and on the server schedule 1 then 25) against S5's total (llama-tts: every frame, then one
      vocoder pass; its audio comes all at once, so its TTFA is its total);
    - S3's RTF (streamed: last chunk / audio) against S5's (total / audio).
(b) the controller's overhead
    - frames/s of ``s3-controller`` (events, SHA-256 of every chunk, stdin reader) against
      ``s3-bare``, the same loop over the same engine with none of that (goal: within 5 %).
(c) the talker's decode rate
    - the talker's forward passes per second inside the controller's loop against ``llama-bench``'s
      token generation (tg) on the talker GGUF, same threads.

Both sides' PCM is also compared (the parity oracle: S3's chunks put together equal S5's WAV).
The weights are random: the figures are a real model's of that shape on a shared 2-core lab host.
Not part of the test suite.

    python benchmarks/llama_tts.py [--scale 0.25] [--frames 100] [--rounds 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from edgelab.adapters.llama_bench import by_test, parse_bench
from edgelab.adapters.llama_tts import parse_log
from edgelab.protocols.wav import wav_facts

ENV = {**os.environ, "OMP_WAIT_POLICY": "passive"}
TEXT = "Edge devices stream audio in chunks; the first chunk decides how soon the listener hears a voice."


def _bins(args) -> dict[str, Path]:
    if args.bin:
        return {p: Path(args.bin) / p for p in ("llama-tts", "s3-controller", "s3-bare", "llama-bench")}
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


def _common(args, talker: Path, mmproj: Path) -> list[str]:
    return [
        "-m", str(talker), "--mmproj", str(mmproj), "-n", str(args.frames), "-s", str(args.seed),
        "-t", str(args.threads), "-c", "2048",
    ]  # fmt: skip


def run_s5(bins, args, talker, mmproj, out: Path) -> dict:
    res = subprocess.run(
        [str(bins["llama-tts"]), *_common(args, talker, mmproj), "-p", TEXT, "-o", str(out)],
        capture_output=True, text=True, env=ENV, timeout=3600,
    )  # fmt: skip
    if res.returncode != 0:
        raise SystemExit(f"llama-tts failed: {res.stderr[-1500:]}")
    log = parse_log(res.stderr)
    wav = out.read_bytes()
    return {
        "ttfa_s": log.total_s,
        "rtf": log.rtf,
        "pcm": wav[(wav.find(b"data") + 8) :],
        "log": log,
        "wav": wav_facts(wav),
    }


def run_s3(bins, args, talker, mmproj, schedule: str) -> dict:
    res = subprocess.run(
        [str(bins["s3-controller"]), *_common(args, talker, mmproj), "--text", TEXT, "--schedule", schedule, "--pcm"],
        capture_output=True, text=True, env=ENV, timeout=3600, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if res.returncode != 0:
        raise SystemExit(f"s3-controller failed: {res.stderr[-1500:]}")
    evs = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    start = next(e["t"] for e in evs if e["kind"] == "request.start")
    chunks = [e for e in evs if e["kind"] == "audio.chunk"]
    end = next(e["t"] for e in evs if e["kind"] == "request.end")
    audio_s = sum(c["samples"] for c in chunks) / 24000
    summary = json.loads(next(e["line"] for e in evs if e["kind"] == "log" and e.get("level") == "summary"))
    first = next(c["t"] for c in chunks if c["samples"])
    return {
        "ttfa_s": first - start,
        "rtf_streamed": (chunks[-1]["t"] - start) / audio_s,
        "rtf_total": (end - start) / audio_s,
        "pcm": b"".join(base64.b64decode(c["pcm"]) for c in chunks),
        "summary": summary,
    }


def run_bare(bins, args, talker, mmproj, schedule: str) -> dict:
    res = subprocess.run(
        [str(bins["s3-bare"]), *_common(args, talker, mmproj), "-p", TEXT, "--schedule", schedule],
        capture_output=True, text=True, env=ENV, timeout=3600, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if res.returncode != 0:
        raise SystemExit(f"s3-bare failed: {res.stderr[-1500:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def run_llama_bench(bins, args, talker) -> float:
    res = subprocess.run(
        [str(bins["llama-bench"]), "-m", str(talker), "-p", "0", "-n", str(args.frames), "-r", "1",
         "-t", str(args.threads), "-o", "jsonl"],
        capture_output=True, text=True, env=ENV, timeout=3600,
    )  # fmt: skip
    if res.returncode != 0:
        raise SystemExit(f"llama-bench failed: {res.stderr[-1500:]}")
    return by_test(parse_bench(res.stdout))[f"tg{args.frames}"].avg_ts


def med(xs) -> float:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.25, help="model widths x this (1 = the real 0.6B)")
    ap.add_argument("--frames", type=int, default=100, help="codec frames per utterance (8 s of audio)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--quant", default=None, help="quantize the talker (q8_0, q4_k_m, ...)")
    ap.add_argument("--source", help="llama.cpp source for the build (default: the llama-cpp-python sdist)")
    ap.add_argument("--bin", help="use the programs in this folder instead of the recipe's build")
    args = ap.parse_args(argv)
    bins = _bins(args)
    from edgelab.models.tts_synth import tts_files

    f = tts_files(
        "qwen3-tts-0.6b", scale=args.scale, quant=args.quant, quantizer=bins.get("llama-quantize"),
        progress=lambda line: print(f"  [synth] {line}", file=sys.stderr),
    )  # fmt: skip
    g = f.geometry
    print(
        f"model qwen3-tts-0.6b x{args.scale:g} (talker {g.layers} layers x {g.hidden}, {f.quant}; random weights), "
        f"{args.frames} frames ({args.frames * 0.08:.1f} s of audio), {args.threads} threads, seed {args.seed}, "
        f"{args.rounds} rounds"
    )
    s5, ramp, server, bare, ctl, tg = [], [], [], [], [], []
    parity = []
    with tempfile.TemporaryDirectory() as d:
        for r in range(args.rounds):
            a = run_s5(bins, args, f.talker, f.mmproj, Path(d) / "s5.wav")
            b = run_s3(bins, args, f.talker, f.mmproj, "ramp")
            c = run_s3(bins, args, f.talker, f.mmproj, "server")
            e = run_bare(bins, args, f.talker, f.mmproj, "ramp")
            t = run_llama_bench(bins, args, f.talker)
            s5.append(a), ramp.append(b), server.append(c), bare.append(e), tg.append(t)
            ctl.append(b["summary"])
            parity.append(a["pcm"] == b["pcm"] == c["pcm"])
            print(
                f"  round {r + 1}: S5 total {a['ttfa_s']:.2f} s, S3 ramp TTFA {b['ttfa_s']:.2f} s, "
                f"server TTFA {c['ttfa_s']:.2f} s, controller {b['summary']['frames_per_s']:.2f} f/s, "
                f"bare {e['frames_per_s']:.2f} f/s, llama-bench tg {t:.1f} t/s",
                flush=True,
            )
    s5_total = med(x["ttfa_s"] for x in s5)
    print("\n(a) S3 against S5 (same model, text, frames, seed)")
    print(
        f"  S5 llama-tts total (= its TTFA)        {s5_total * 1000:9.0f} ms   RTF {med(x['rtf'] for x in s5):.2f}"
    )
    for name, rows in (("ramp 2,4,8,16,25", ramp), ("server 1 then 25", server)):
        ttfa = med(x["ttfa_s"] for x in rows)
        print(
            f"  S3 {name:<18} TTFA              {ttfa * 1000:9.0f} ms   S5 total / S3 TTFA = {s5_total / ttfa:5.1f}x   "
            f"RTF streamed {med(x['rtf_streamed'] for x in rows):.2f}, total {med(x['rtf_total'] for x in rows):.2f} "
            f"(S3/S5 {med(x['rtf_total'] for x in rows) / med(x['rtf'] for x in s5):.2f}x)"
        )
    wav_calls = med(x["summary"]["wav_calls"] for x in ramp)
    print(
        f"  code2wav calls per utterance: S3 ramp {wav_calls:.0f}, S5 {-(-args.frames // 72)} (72-frame window each)"
    )
    print(f"  parity (S3 ramp, S3 server and S5 PCM byte-equal): {all(parity)} in {len(parity)} rounds")
    fc, fb = med(x["frames_per_s"] for x in ctl), med(x["frames_per_s"] for x in bare)
    print("\n(b) controller overhead (ramp schedule)")
    print(
        f"  s3-controller {fc:.3f} frames/s   s3-bare {fb:.3f} frames/s   controller / bare = {fc / fb:.3f} (goal >= 0.95)"
    )
    td = med(x["frames"] / x["talker_decode_s"] for x in ctl if x["talker_decode_s"])
    tb = med(x["talker_decode_per_s"] for x in bare)
    print("\n(c) talker decode rate")
    print(
        f"  talker forward passes in the controller {td:.1f}/s (s3-bare {tb:.1f}/s)   llama-bench tg{args.frames} "
        f"{med(tg):.1f} t/s   controller / llama-bench = {td / med(tg):.2f}"
    )
    cp = med(x["code_predictor_s"] / x["frames"] for x in ctl)
    print(f"  per frame: code predictor (GEN_CODE) {cp * 1000:.1f} ms, talker {1000 / td:.1f} ms")
    return 0 if all(parity) else 1


if __name__ == "__main__":
    sys.exit(main())
