"""`edgelab watch` and the TUI's Run page show the same figures for the same run.

Both render ``edgelab.views.run.RunView`` (the one read model of a run); this test feeds one
recorded run, the study's requests.jsonl in tests/fixtures/study_run (raw chunk lists from a
real device), through `watch --once` and through the Run page under Textual's Pilot, and
compares what each shows: the headline figures (at the precision each prints) and the gap and
buffer series captions, character for character.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgelab.cli import app as cli_app
from edgelab.metrics.results import import_study
from edgelab.store.db import dispose_engines, get_engine
from edgelab.tui.app import EdgelabApp
from edgelab.tui.screens.run import RunScreen
from edgelab.tui.widgets.metric_tile import MetricTile
from edgelab.tui.widgets.telemetry import Telemetry
from edgelab.views.run import run_view

STUDY = Path(__file__).parents[1] / "fixtures" / "study_run"


@pytest.fixture
def recorded(tmp_path):
    dispose_engines()
    path = tmp_path / "lab.db"
    engine = get_engine(str(path))
    yield engine, path, import_study(engine, STUDY)
    dispose_engines()


def _watch(path: Path, run_id: str) -> str:
    res = CliRunner().invoke(cli_app, ["--db", str(path), "watch", run_id, "--once"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res.stdout


async def _tui(engine, run_id: str) -> dict[str, str]:
    app = EdgelabApp(engine, open_run=run_id, poll_s=3600, run_poll_s=3600)
    async with app.run_test(size=(150, 45)) as pilot:
        for _ in range(1500):
            if isinstance(app.screen, RunScreen) and app.screen.view is not None:
                break
            await pilot.pause(0.02)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.view is not None
        await pilot.pause()
        shown = {
            key: str(screen.query_one(f"#{key}", MetricTile).render()) for key in ("t1", "t2", "t3", "t4")
        }
        for key in ("gaps", "buffer"):
            shown[key] = screen.query_one(f"#{key}", Telemetry)._caption()
        return shown


def _num(pattern: str, text: str) -> float:
    m = re.search(pattern, text)
    assert m, (pattern, text)
    return float(m[1])


async def test_watch_and_the_run_page_show_the_same_figures(recorded) -> None:
    engine, path, run_id = recorded
    frame = _watch(path, run_id)
    tui = await _tui(engine, run_id)
    view = run_view(engine, run_id)

    # the recorded run's own figures (see test_runs_import_cli for their derivation)
    assert view.summary_source == "final" and view.kind == "audio"
    # gaps per request, each request's first chunk excluded; the warm-up request's gap comes first
    assert view.chunk_gaps_ms == [2788.2, 1237.5, 1250.0, 1220.0, 1200.0]
    audio = view.summary["audio"]

    # each view prints the summary's number at its own precision: watch one decimal, the tiles fewer
    ttfa = _num(r"TTFA\s+p50 ([\d.]+) ms", frame)
    assert ttfa == audio["ttfa_ms"]["p50"] == 412.5 and tui["t1"].startswith(f"{ttfa:.0f} ms")
    assert "p95 450, n=3" in tui["t1"] and "p95 450.0 ms  (n=3)" in frame
    rtf = audio["rtf_streamed"]["p50"]
    assert f"streamed p50 {rtf:.1f}" in frame and tui["t2"].startswith(f"{rtf:.2f}")
    underruns = _num(r"underruns\s+(\d+) in", frame)
    assert underruns == audio["underruns_at_ttfa"] == 2 and tui["t3"].startswith("2\n")
    assert (
        f"{audio['requests_with_underrun']} in" in frame
        and f"{audio['requests_with_underrun']} of" in tui["t3"]
    )

    # the series: the same caption text in both views, from the same list
    assert tui["gaps"] == "chunk gap: 1200 ms  (min 1200, max 2788.2, 5 samples)"
    assert tui["gaps"] in frame
    assert (
        tui["buffer"] == "playout buffer: 80 ms  (min 80, max 80, 1 samples)"
    )  # short-2: one chunk, unfinished
    assert tui["buffer"].replace("playout buffer", "latest request, from TTFA") in frame
    assert tui["t4"].startswith("80 ms")


async def test_interleaved_requests_give_one_gap_series(tmp_path) -> None:
    """Two requests streaming at once (chunks interleaved in arrival order): the old `watch` paired
    neighbouring rows and dropped every gap that crossed requests, the Run page kept one per request;
    both now show the per-request gaps of the read model."""
    from edgelab.metrics import events as ev
    from edgelab.metrics.ingest import Ingestor
    from edgelab.store.db import session_scope
    from edgelab.store.runs import create_run

    dispose_engines()
    path = tmp_path / "lab.db"
    engine = get_engine(str(path))
    try:
        with session_scope(engine) as s:
            run_id = create_run(s, pipeline="qwen3-tts-0.6b", device_name="orin-agx", virtual=True).id
        t0 = 1_772_366_400.0
        with Ingestor(engine, run_id, flush_s=0.0, live_every_s=0.0) as ing:
            ing.feed(ev.RunStart(t=t0, run=run_id, virtual=True))
            for req in ("a", "b"):
                ing.feed(ev.RequestStart(t=t0, run=run_id, request=req))
            # a at 100, 400, 700 ms; b at 250, 550, 850 ms: arrivals alternate a b a b a b
            for i in range(3):
                for req, base in (("a", 100), ("b", 250)):
                    ing.feed(
                        ev.AudioChunk(
                            t=t0 + (base + 300 * i) / 1000, run=run_id, request=req, idx=i, samples=1920 * 4
                        )
                    )
            for req in ("a", "b"):
                ing.feed(ev.RequestEnd(t=t0 + 0.9, run=run_id, request=req))
        view = run_view(engine, run_id)
        assert view.chunk_gaps_ms == [300.0] * 4  # a: 300, b: 300, a: 300, b: 300; none across requests
        frame = _watch(path, run_id)
        tui = await _tui(engine, run_id)
        assert tui["gaps"] == "chunk gap: 300 ms  (min 300, max 300, 4 samples)" and tui["gaps"] in frame
        assert tui["buffer"].replace("playout buffer", "latest request, from TTFA") in frame
    finally:
        dispose_engines()


def test_concurrent_polls_fold_every_sample_once(tmp_path):
    """The TUI's exclusive poll worker does not stop a thread already reading, so two polls can
    overlap: each stored token gap must still be counted once (seen as 9 gaps for 4 once)."""
    import threading

    from text_run import text_run

    from edgelab.views.run import RunReader

    engine = get_engine(str(tmp_path / "lab.db"))
    try:
        run_id, ing = text_run(engine, [40.0 + 10 * i for i in range(50)], request="m1")
        ing.flush(live=True)
        follower = RunReader(engine, run_id)
        start = threading.Barrier(6)

        def poll():
            start.wait()
            follower.poll()

        threads = [threading.Thread(target=poll) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        view = follower.poll()
        assert view.chunk_gaps_ms == pytest.approx([10.0] * 49, abs=0.2)
        ing.close("finished")
    finally:
        dispose_engines()
