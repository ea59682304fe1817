"""A run written by another process appears on the Run screen, live, within two polls (0.5 s each).

The writer is a separate Python process that creates a run and feeds events through the metrics
ingest (the path `edgelab deploy` uses); the TUI sees it only through the shared SQLite file.
No wall-clock threshold: the bound is counted in the screen's database polls.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest
from text_run import T0, text_run
from tui_wait import settle, until_polled

from edgelab.store.db import dispose_engines, get_engine
from edgelab.tui.app import EdgelabApp
from edgelab.tui.screens.run import RunScreen
from edgelab.tui.widgets.log_tail import LogTail
from edgelab.tui.widgets.metric_tile import MetricTile

WRITER = textwrap.dedent(
    """
    import sys, time
    from edgelab.metrics import events as ev
    from edgelab.metrics.ingest import Ingestor
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.runs import create_run

    engine = get_engine(sys.argv[1])
    with session_scope(engine) as s:
        run = create_run(s, pipeline="qwen3-tts-0.6b", device_name="orin-agx-000", strategy="S5",
                         runtime="reference", state="pending", virtual=True, kind="deploy")
        run_id = run.id
    print("run", run_id, flush=True)
    sys.stdin.readline()                       # the TUI is watching: go
    ing = Ingestor(engine, run_id, flush_s=0.0, live_every_s=0.0)
    t0 = time.time()
    ing.feed(ev.RunStart(t=t0, run=run_id, pipeline="qwen3-tts-0.6b", device="orin-agx-000", virtual=True))
    ing.feed(ev.RequestStart(t=t0, run=run_id, request="r1"))
    # chunks of 2, 4 and 8 frames (1920 samples each) at 150, 300 and 620 ms after the request
    for i, (ms, frames) in enumerate([(150, 2), (300, 4), (620, 8)]):
        ing.feed(ev.AudioChunk(t=t0 + ms / 1000, run=run_id, request="r1", idx=i, samples=1920 * frames))
    ing.feed(ev.LogLine(t=t0 + 0.7, run=run_id, line="talker: first chunk out", stream="stdout"))
    ing.flush(live=True)
    print("written", flush=True)
    sys.stdin.readline()
    ing.close("finished")
    print("closed", flush=True)
    """
)


async def _line(proc) -> str:
    return (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()


async def test_run_from_another_process_shows_live(tmp_path) -> None:
    db = str(tmp_path / "lab.db")
    engine = get_engine(db)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, db, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    try:
        first = await _line(proc)
        assert first.startswith("run "), first
        run_id = first.split()[1]
        app = EdgelabApp(engine, open_run=run_id, run_poll_s=0.5)
        async with app.run_test(size=(140, 45)) as pilot:
            await settle(app, pilot)
            assert isinstance(app.screen, RunScreen) and app.screen.view is not None
            screen = app.screen
            # nothing measured yet, but the pipeline says what will be: an audio run's tiles, not chunk-less text
            assert screen.view.run["state"] == "pending" and screen.view.kind == "audio"
            assert "unknown" in str(
                screen.query_one("#t1", MetricTile).render()
            )  # no audio yet: unknown, not 0

            proc.stdin.write(b"go\n")
            await proc.stdin.drain()
            assert await _line(proc) == "written"
            polls_at_commit = screen.polls
            # the writer commits event by event: a poll during its feed can see the run running with
            # only its first chunk, so wait for the poll that sees all three
            await until_polled(
                app,
                pilot,
                lambda: (
                    screen.view.kind == "audio"
                    and screen.view.run["state"] == "running"
                    and len(screen.view.buffer_ms) == 3
                ),
            )
            # seen by the first or second poll after the writer committed: within a second at 0.5 s a poll
            assert screen.polls - polls_at_commit <= 2

            v = screen.view
            assert v.run["virtual"] is True
            audio = v.summary["audio"]
            assert audio["ttfa_ms"]["p50"] == pytest.approx(150.0, abs=0.01)  # the first chunk's arrival
            # ring buffer started at TTFA: chunk 2 needed at 150 + 160 = 310 ms, arrived 300 (ok);
            # chunk 3 needed at 150 + 160 + 320 = 630 ms, arrived 620 (ok): no underrun
            assert audio["underruns_at_ttfa"] == 0
            assert v.chunk_gaps_ms == pytest.approx([150.0, 320.0], abs=0.2)
            # buffer after each chunk: 160; 160+320-(300-150)=330; 480+640-(620-150)=650 ms
            assert v.buffer_ms == pytest.approx([160.0, 330.0, 650.0], abs=0.2)
            assert "150 ms" in str(screen.query_one("#t1", MetricTile).render())
            assert "VIRTUAL" in str(screen.query_one("#run-title").render())
            await until_polled(
                app, pilot, lambda: "talker: first chunk out" in "\n".join(screen.query_one(LogTail).lines)
            )

            proc.stdin.write(b"end\n")
            await proc.stdin.drain()
            assert await _line(proc) == "closed"
            await until_polled(app, pilot, lambda: screen.view.run["state"] == "finished")
            assert screen.view.summary_source == "final"
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        dispose_engines()


async def test_a_text_run_shows_ttft_decode_rate_and_token_gaps(tmp_path) -> None:
    """A llama-server run (text events on the lab clock) gets the text tiles, not audio ones."""
    from edgelab.metrics import events as ev

    engine = get_engine(str(tmp_path / "lab.db"))
    try:
        # first token at 40 ms, then one each 10 ms
        run_id, ing = text_run(engine, [40.0, 50.0, 60.0, 70.0, 80.0])
        ing.feed(ev.ResourceSample(t=T0 + 0.09, run=run_id, source="proc", rss_bytes=200 * 2**20))
        ing.flush(live=True)
        app = EdgelabApp(engine, open_run=run_id, run_poll_s=0.5)
        async with app.run_test(size=(140, 45)) as pilot:
            await settle(app, pilot)
            assert (
                isinstance(app.screen, RunScreen)
                and app.screen.view is not None
                and app.screen.view.kind == "text"
            )
            screen = app.screen
            text = screen.view.summary["text"]
            assert text["ttft_ms"]["p50"] == pytest.approx(40.0, abs=0.01)
            assert text["decode_tok_s"]["p50"] == pytest.approx(100.0, rel=1e-3)  # 4 tokens in 40 ms
            assert screen.view.chunk_gaps_ms == pytest.approx([10.0, 10.0, 10.0, 10.0], abs=0.2)
            assert "40 ms" in str(screen.query_one("#t1", MetricTile).render())
            assert "100.0" in str(screen.query_one("#t3", MetricTile).render())
            assert "200 MiB" in str(screen.query_one("#t4", MetricTile).render())
        ing.close("finished")
    finally:
        dispose_engines()
