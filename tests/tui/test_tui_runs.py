"""Any run can be opened: the runs list of a device (R on its page) and of the fleet (R on the
fleet), newest first, times local, enter opens the run under the cursor, not only the newest."""

from __future__ import annotations

from datetime import timedelta

import pytest
from tui_seed import NOW, seed
from tui_wait import settle

from edgelab.store.db import dispose_engines, get_engine, session_scope
from edgelab.store.runs import create_run
from edgelab.tui.app import EdgelabApp
from edgelab.tui.screens.device import DeviceScreen
from edgelab.tui.screens.fleet import FleetScreen
from edgelab.tui.screens.run import RunScreen
from edgelab.tui.screens.runs import RunsScreen
from edgelab.units import when


@pytest.fixture
def engine(tmp_path):
    eng = get_engine(str(tmp_path / "lab.db"))
    seed(eng, 2)
    with session_scope(eng) as s:  # the demo's run still going, two newer ones finished after it
        for i, (rid, state) in enumerate([("r-demo", "running"), ("r-b", "finished"), ("r-c", "failed")]):
            at = NOW - timedelta(minutes=30 - 10 * i)
            create_run(
                s,
                id=rid,
                pipeline="qwen3-tts-0.6b",
                device_name="orin-agx-000",
                runtime="reference",
                strategy="S3",
                kind="deploy",
                state=state,
                virtual=True,
                created_at=at,
                started_at=at,
            )
        create_run(
            s,
            id="r-other",
            pipeline="internvla-a1",
            device_name="s25-001",
            runtime="mnn",
            strategy="S3",
            kind="bench",
            state="finished",
            created_at=NOW,
            started_at=NOW,
        )
    yield eng
    dispose_engines()


async def test_a_devices_runs_list_opens_an_older_still_running_run(engine) -> None:
    app = EdgelabApp(engine, clock=lambda: NOW, poll_s=3600, run_poll_s=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        await pilot.press("enter")  # orin-agx-000
        await settle(app, pilot)
        assert isinstance(app.screen, DeviceScreen)
        await pilot.press("R")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen) and screen.loaded
        assert [r["id"] for r in screen.rows] == ["r-c", "r-b", "r-demo"]  # newest first, this device only
        demo = screen.rows[2]
        assert demo["strategy"] == "S3 (reference imitation)"
        assert demo["started"] == when(NOW - timedelta(minutes=30))  # the operator's time zone
        await pilot.press("down", "down", "enter")
        await settle(app, pilot)
        assert isinstance(app.screen, RunScreen) and app.screen.run_id == "r-demo"
        assert sum(isinstance(s, RunScreen) for s in app.screen_stack) == 1  # opened once


async def test_the_fleets_runs_list_has_every_device(engine) -> None:
    app = EdgelabApp(engine, clock=lambda: NOW, poll_s=3600, run_poll_s=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, FleetScreen)
        await pilot.press("R")
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen) and {r["device"] for r in screen.rows} == {
            "orin-agx-000",
            "s25-001",
        }
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, RunScreen) and app.screen.run_id == screen.rows[0]["id"]
