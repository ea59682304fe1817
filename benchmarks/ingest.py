"""Bench: events/s through ingest -> live metrics -> store, and live-view lag with 16 concurrent streams.

Prints numbers; not part of the test suite. Goals (issue 6): >= 100k events/s; lag p95 <= 100 ms.

    python benchmarks/ingest.py [--events 300000] [--streams 16] [--seconds 5]

Throughput: a realistic TTS event mix (request start, 1920-sample audio chunks with
sha256, request end, a resource sample every 100 events), fed to one Ingestor writing a
SQLite file (WAL) with the default batching; timed from the first event to the last
commit, then the final recompute from the stored raw samples is timed separately.

Lag: 16 producer processes, each a run with its own Ingestor on the same database file,
emit audio chunks (stamped with time.time() when produced) every 20 ms; a watcher process
polls the database the way `edgelab watch` does (newest raw samples, live summary) every
10 ms. Lag = when the watcher first sees a chunk minus when it was produced.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgelab.metrics import events as ev  # noqa: E402
from edgelab.metrics.stats import summarize  # noqa: E402


def _events(n: int, run_id: str) -> list[ev.Event]:
    out: list[ev.Event] = [ev.RunStart(t=0.0, run=run_id)]
    t, r = 1_750_000_000.0, 0
    sha = "ab" * 32
    while len(out) < n:
        name = f"q{r}"
        out.append(ev.RequestStart(t=t, run=run_id, request=name, phase="warmup" if r == 0 else "measured"))
        for i in range(96):
            out.append(
                ev.AudioChunk(t=t + 0.3 + i * 0.02, run=run_id, request=name, idx=i, samples=1920, sha256=sha)
            )
            if i % 48 == 0:
                out.append(
                    ev.ResourceSample(
                        t=t + i * 0.02,
                        run=run_id,
                        device="virt",
                        source="proc",
                        cpu_pct=50.0,
                        mem_available_bytes=1 << 30,
                    )
                )
        out.append(ev.RequestEnd(t=t + 2.3, run=run_id, request=name))
        t += 3.0
        r += 1
    return out[:n] + [ev.RunEnd(t=t)]


def throughput(n: int, db: str) -> dict:
    from edgelab.metrics.ingest import Ingestor
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.runs import create_run

    engine = get_engine(db)
    with session_scope(engine) as s:
        rid = create_run(s, pipeline="qwen3-tts", device_name="virt", virtual=True).id
    evs = _events(n, rid)
    lines = [ev.encode(e) for e in evs]
    t0 = time.perf_counter()
    decoded = [ev.decode(line) for line in lines]
    t_decode = time.perf_counter() - t0
    ing = Ingestor(engine, rid)
    t0 = time.perf_counter()
    for e in decoded:
        ing.feed(e)
    ing.flush(live=True)
    t_ingest = time.perf_counter() - t0
    t0 = time.perf_counter()
    final = ing.close()
    t_close = time.perf_counter() - t0
    return {
        "events": len(evs),
        "ingest_events_per_s": len(evs) / t_ingest,
        "json_decode_plus_ingest_events_per_s": len(evs) / (t_ingest + t_decode),
        "final_recompute_s": t_close,
        "live_equals_final": final["live_equals_final"],
    }


def _producer(db: str, run_id: str, seconds: float, period: float, ready, go) -> None:
    from edgelab.metrics.ingest import Ingestor
    from edgelab.store.db import get_engine

    engine = get_engine(db)
    ing = Ingestor(engine, run_id)
    ready.release()
    go.wait()
    end = time.time() + seconds
    i, r = 0, 0
    ing.feed(ev.RunStart(t=time.time(), run=run_id))
    ing.feed(ev.RequestStart(t=time.time(), run=run_id, request="q0"))
    nxt = time.time()
    while time.time() < end:
        nxt += period
        time.sleep(max(0.0, nxt - time.time()))
        ing.feed(ev.AudioChunk(t=time.time(), run=run_id, request=f"q{r}", idx=i, samples=1920))
        i += 1
        if i % 50 == 0:
            ing.feed(ev.RequestEnd(t=time.time(), run=run_id, request=f"q{r}"))
            r += 1
            ing.feed(ev.RequestStart(t=time.time(), run=run_id, request=f"q{r}"))
    ing.flush(live=True)
    ing.close()


def _watcher(db: str, seconds: float, poll: float, out_path: str, go) -> None:
    from sqlalchemy import text

    from edgelab.store.db import get_engine

    engine = get_engine(db)
    lags: list[float] = []
    staleness: list[float] = []
    last_id = 0
    go.wait()
    end = time.time() + seconds + 1.0
    with engine.connect() as conn:
        while time.time() < end:
            now_rows = conn.execute(
                text("SELECT id, t FROM run_sample WHERE id > :i ORDER BY id"), {"i": last_id}
            ).all()
            summ = conn.execute(text("SELECT computed_at FROM run_summary WHERE kind = 'live'")).all()
            conn.commit()
            seen = time.time()
            for rid, t in now_rows:
                lags.append((seen - t) * 1000.0)
                last_id = max(last_id, rid)
            for (computed,) in summ:
                if isinstance(computed, str):
                    from datetime import datetime

                    computed = datetime.fromisoformat(computed).timestamp()
                else:
                    computed = computed.timestamp()
                staleness.append((seen - computed) * 1000.0)
            time.sleep(poll)
    Path(out_path).write_text(json.dumps({"lags": lags, "staleness": staleness}))


def lag(streams: int, seconds: float, db: str) -> dict:
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.runs import create_run

    engine = get_engine(db)
    with session_scope(engine) as s:
        runs = [
            create_run(s, pipeline="qwen3-tts", device_name=f"virt{i}", virtual=True).id
            for i in range(streams)
        ]
    engine.dispose()
    ctx = mp.get_context("spawn")
    ready, go = ctx.Semaphore(0), ctx.Event()
    out = os.path.join(os.path.dirname(db), "lag.json")
    procs = [ctx.Process(target=_producer, args=(db, r, seconds, 0.02, ready, go)) for r in runs]
    watcher = ctx.Process(target=_watcher, args=(db, seconds, 0.01, out, go))
    try:
        for p in procs:
            p.start()
        watcher.start()
        for _ in procs:
            ready.acquire(timeout=120)
        go.set()
        for p in [*procs, watcher]:
            p.join(timeout=seconds + 120)
    finally:
        for p in [*procs, watcher]:
            if p.is_alive():
                p.terminate()
                p.join(5)
    data = json.loads(Path(out).read_text())
    return {
        "streams": streams,
        "samples_seen": len(data["lags"]),
        "sample_lag_ms": summarize(data["lags"]),
        "live_summary_staleness_ms": summarize(data["staleness"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="edgelab-bench-") as d:
        tp = throughput(args.events, os.path.join(d, "tp.db"))
        print(
            f"ingest -> metrics -> store: {tp['ingest_events_per_s']:,.0f} events/s "
            f"({tp['events']:,} events; with JSON decode {tp['json_decode_plus_ingest_events_per_s']:,.0f}/s; "
            f"goal >= 100,000/s)"
        )
        print(
            f"final recompute from raw samples: {tp['final_recompute_s']:.2f} s; "
            f"live == final: {tp['live_equals_final']}"
        )
        lg = lag(args.streams, args.seconds, os.path.join(d, "lag.db"))
        s, st = lg["sample_lag_ms"], lg["live_summary_staleness_ms"]
        print(
            f"live-view lag, {lg['streams']} concurrent streams (n={s['count']} chunks): "
            f"p50 {s['p50']:.1f} ms, p95 {s['p95']:.1f} ms, max {s['max']:.1f} ms (goal p95 <= 100 ms)"
        )
        print(
            f"live summary staleness at each poll (n={st['count']}): p50 {st['p50']:.1f} ms, p95 {st['p95']:.1f} ms"
        )


if __name__ == "__main__":
    main()
