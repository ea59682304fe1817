"""A llama-server-like text run written through the real Ingestor, for the run-view tests.

The run is a VIRTUAL bench of spark-x2.5 on orin-agx: one request whose tokens land at the
given milliseconds after the request started (lab clock from ``T0``).
"""

from __future__ import annotations

from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.store.db import session_scope
from edgelab.store.runs import create_run

T0 = 1_700_000_000.0


def text_run(engine, token_ms: list[float], request: str = "m00001") -> tuple[str, Ingestor]:
    """(run id, its open Ingestor) after one request with a token at each ``token_ms``; the caller
    may feed more, then flushes and closes it."""
    with session_scope(engine) as s:
        run_id = create_run(
            s,
            pipeline="spark-x2.5",
            device_name="orin-agx",
            strategy="S3",
            runtime="llama.cpp",
            state="pending",
            virtual=True,
            kind="bench",
        ).id
    ing = Ingestor(engine, run_id, flush_s=0.0, live_every_s=0.0)
    ing.feed(ev.RunStart(t=T0, run=run_id, pipeline="spark-x2.5", device="orin-agx", virtual=True))
    ing.feed(ev.RequestStart(t=T0, run=run_id, request=request))
    for i, ms in enumerate(token_ms):
        ing.feed(ev.TextToken(t=T0 + ms / 1000, run=run_id, request=request, n=1, text=f"t{i}"))
    ing.feed(ev.RequestEnd(t=T0 + max(token_ms) / 1000, run=run_id, request=request))
    return run_id, ing
