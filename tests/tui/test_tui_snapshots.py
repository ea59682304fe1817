"""Snapshot tests (pytest-textual-snapshot) of every screen, on a seeded database with fixed times.

Update after an intended UI change: python -m pytest tests/tui/test_tui_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest
from tui_seed import NOW, seed
from tui_wait import settle

from edgelab.store.db import dispose_engines, get_engine, session_scope
from edgelab.tui.app import EdgelabApp
from edgelab.tui.screens.deploy import DeployScreen
from edgelab.tui.screens.device import DeviceScreen
from edgelab.tui.screens.fleet import FleetScreen
from edgelab.tui.screens.matrix import MatrixScreen
from edgelab.tui.screens.run import RunScreen

SIZE = (150, 45)
T0 = 1_772_366_400.0  # 2026-03-01 12:00 UTC, the seed's NOW


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """Screens show times in the operator's zone: the snapshots are taken in UTC wherever they run."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def engine(tmp_path):
    eng = get_engine(str(tmp_path / "lab.db"))
    seed(eng, 6)
    yield eng
    dispose_engines()


def app_for(engine, **kw) -> EdgelabApp:
    return EdgelabApp(engine, clock=lambda: NOW, poll_s=3600, run_poll_s=3600, **kw)


def test_fleet(engine, snap_compare) -> None:
    app = app_for(engine)

    async def ready(pilot):
        await settle(app, pilot)
        assert isinstance(app.screen, FleetScreen) and app.screen.loaded

    assert snap_compare(app, terminal_size=SIZE, run_before=ready)


def test_device(engine, snap_compare) -> None:
    app = app_for(engine)

    async def ready(pilot):
        await settle(app, pilot)
        assert isinstance(app.screen, FleetScreen) and app.screen.loaded
        await pilot.press("enter")  # orin-agx-000, the first row
        await settle(app, pilot)
        assert isinstance(app.screen, DeviceScreen) and app.screen.detail is not None

    assert snap_compare(app, terminal_size=(150, 70), run_before=ready)


def _audio_run(engine) -> str:
    from edgelab.metrics import events as ev
    from edgelab.metrics.ingest import Ingestor
    from edgelab.store.runs import create_run

    with session_scope(engine) as s:
        create_run(
            s,
            id="r-snapshot",
            pipeline="qwen3-tts-0.6b",
            device_name="orin-agx-000",
            strategy="S5",
            runtime="reference",
            state="pending",
            virtual=True,
            kind="deploy",
        )
    with Ingestor(engine, "r-snapshot", flush_s=0.0, live_every_s=0.0) as ing:
        ing.feed(ev.RunStart(t=T0, run="r-snapshot", virtual=True))
        for r in range(3):
            t = T0 + r * 5
            ing.feed(ev.RequestStart(t=t, run="r-snapshot", request=f"q{r}"))
            # 1 frame first, then 25-frame chunks: the first-chunk cliff shows as an underrun
            for i, (ms, frames) in enumerate([(120, 1), (900, 25), (2700, 25)]):
                ing.feed(
                    ev.AudioChunk(
                        t=t + ms / 1000, run="r-snapshot", request=f"q{r}", idx=i, samples=1920 * frames
                    )
                )
            ing.feed(ev.RequestEnd(t=t + 2.8, run="r-snapshot", request=f"q{r}"))
            ing.feed(
                ev.ResourceSample(
                    t=t + 1,
                    run="r-snapshot",
                    device="orin-agx-000",
                    cpu_pct=40.0 + r * 10,
                    temps_c={"cpu": 50.0 + r},
                )
            )
            ing.feed(ev.LogLine(t=t + 2.9, run="r-snapshot", line=f"request q{r} done", stream="stdout"))
    return "r-snapshot"


def test_run(engine, snap_compare) -> None:
    run_id = _audio_run(engine)
    app = app_for(engine, open_run=run_id)

    async def ready(pilot):
        await settle(app, pilot)
        assert isinstance(app.screen, RunScreen) and app.screen.view is not None

    assert snap_compare(app, terminal_size=SIZE, run_before=ready)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_deploy_dialog(engine, snap_compare, size) -> None:
    """The form, the buttons and the keys' footer on screen (the plan's scroll into view after a dry
    run is asserted in tests/tui/test_tui_fleet.py: its argv names this machine's interpreter)."""
    app = app_for(engine)

    async def ready(pilot):
        await settle(app, pilot)
        assert isinstance(app.screen, FleetScreen) and app.screen.loaded
        await pilot.press("down", "down", "down")  # s25-001
        await pilot.press("d")
        await settle(app, pilot)
        assert isinstance(app.screen, DeployScreen) and app.screen.decisions is not None

    assert snap_compare(app, terminal_size=size, run_before=ready)


def test_add_device_dialog(engine, snap_compare) -> None:
    app = app_for(engine)

    async def ready(pilot):
        await settle(app, pilot)
        assert isinstance(app.screen, FleetScreen) and app.screen.loaded
        await pilot.press("a")
        await pilot.press(*"orin-new")

    assert snap_compare(app, terminal_size=SIZE, run_before=ready)


def test_matrix(engine, snap_compare) -> None:
    app = app_for(engine)

    async def ready(pilot):
        await settle(app, pilot)
        assert isinstance(app.screen, FleetScreen) and app.screen.loaded
        await pilot.press("M")
        await settle(app, pilot)
        assert isinstance(app.screen, MatrixScreen) and app.screen.loaded

    assert snap_compare(app, terminal_size=SIZE, run_before=ready)
