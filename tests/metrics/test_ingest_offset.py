"""A follower's byte offset and the samples it covers are written together, whatever else is fed.

The follower counts a line into its offset before it feeds the line's event (so a flush inside the
feed covers it). A telemetry sample offered by the sampler thread is fed first, at the start of that
feed; if that were allowed to flush, the offset would be stored without the event, and a follower
killed before its next flush would lose the chunk for good (issue 27: 1 chunk in 39, under load).
"""

from __future__ import annotations

import time

from sqlalchemy import func, select

from edgelab.deploy.follow.lease import leased
from edgelab.metrics import events as ev
from edgelab.store.db import get_engine, session_scope
from edgelab.store.runs import RunSample, create_run, get_run


def test_no_flush_stores_an_offset_beyond_the_samples_written(dbpath):
    engine = get_engine(str(dbpath))
    with session_scope(engine) as s:
        create_run(s, id="r1", pipeline="qwen3-tts", kind="deploy", state="running")
    ing = leased(engine, "r1", {"owner": "me", "offset": 0}, {})
    ing.flush_s = 0.0  # every feed may flush: the worst case
    seen: list[tuple[int, int]] = []  # (offset stored, audio rows stored) after each flush
    real_flush = ing.flush

    def flush(**kw):
        real_flush(**kw)
        with session_scope(engine, write=False) as s:
            stored = int((get_run(s, "r1").meta.get("follower") or {}).get("offset", 0))
            rows = s.exec(
                select(func.count()).select_from(RunSample).where(RunSample.run_id == "r1")
            ).scalar_one()
        seen.append((stored, int(rows)))

    ing.flush = flush  # type: ignore[method-assign]
    t = time.time()
    ing.offset += 10
    ing.feed(ev.RequestStart(t=t, run="r1", request="q"))
    for i in range(5):
        ing.offer(ev.ResourceSample(t=t + i, run="r1", device="d", source="proc", cpu_pct=1.0))
        ing.offset += 100  # the follower counts the line first ...
        ing.feed(ev.AudioChunk(t=t + i, run="r1", request="q", idx=i, samples=1920))  # ... then feeds it
    covered = {10 + 100 * n: n for n in range(6)}  # offset -> audio chunks its lines hold
    assert seen and all(rows >= covered[off] for off, rows in seen), seen
