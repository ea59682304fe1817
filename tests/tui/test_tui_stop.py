# ruff: noqa: F811 - the deploy_lab fixture imported from test_deploy_helpers is a parameter by design
"""Pilot test of the stop flow on a real deployment: the reference workload deployed on the
virtual phone (a real process on the lab host), shown on the Run screen, stopped with `s`."""

from __future__ import annotations

import pytest
from deploy.test_deploy_helpers import alive_on_host, deploy_lab, group_members  # noqa: F401 - fixture
from tui_wait import settle, until_polled

from edgelab.deploy import control, launch
from edgelab.deploy.planning import DeployRequest
from edgelab.store.db import session_scope
from edgelab.store.deployments import get_deployment, processes
from edgelab.tui.app import EdgelabApp
from edgelab.tui.screens.run import RunScreen

pytestmark = [pytest.mark.adb, pytest.mark.ssh, pytest.mark.slow]


async def test_stop_a_running_deployment_from_the_run_screen(deploy_lab) -> None:
    _url, engine, opts = deploy_lab
    dep = launch.deploy(engine, DeployRequest("s25", "qwen3-tts"), opts=opts)
    run_id = dep.run_id
    with session_scope(engine, write=False) as s:
        (pid,) = [p.pid for p in processes(s, get_deployment(s, run_id).id)]
    try:
        assert alive_on_host(pid)
        app = EdgelabApp(engine, open_run=run_id, run_poll_s=0.5)
        async with app.run_test(size=(150, 45)) as pilot:
            await settle(app, pilot)
            assert isinstance(app.screen, RunScreen) and app.screen.view is not None
            screen = app.screen
            assert screen.view.run["state"] == "running" and screen.view.run["device"] == "s25"
            assert "VIRTUAL" in str(screen.query_one("#run-title").render())
            await pilot.press("s")
            await until_polled(
                app, pilot, lambda: screen.view.run["state"] == "stopped", polls=120
            )  # 60 s, as before
        assert not alive_on_host(pid) and group_members(pid) == []
    finally:
        if alive_on_host(pid):
            control.stop(engine, run_id, opts=opts)
