"""Pilot tests of the operator's flows: fleet filter/sort, add a device, probe and check a real
(local) device, open its page, deploy dry run. Devices are reached for real: the local transport
runs the probe as real processes on this host."""

from __future__ import annotations

import pytest
from tui_seed import NOW, seed
from tui_wait import settle

from edgelab.store.db import dispose_engines, get_engine, session_scope
from edgelab.store.devices import add_device, get_device
from edgelab.store.models import Device
from edgelab.store.snapshots import list_snapshots
from edgelab.tui.app import EdgelabApp
from edgelab.tui.screens.add_device import AddDeviceScreen
from edgelab.tui.screens.device import DeviceScreen
from edgelab.tui.screens.fleet import FleetScreen
from edgelab.tui.widgets.fleet_table import FleetTable

SIZE = (150, 45)


@pytest.fixture
def engine(tmp_path):
    eng = get_engine(str(tmp_path / "lab.db"))
    yield eng
    dispose_engines()


def table(app) -> FleetTable:
    return app.screen.query_one(FleetTable)


def names(app) -> list[str]:
    t = table(app)
    return [t.coordinate_to_cell_key((i, 0)).row_key.value for i in range(t.row_count)]


async def fleet_ready(app, pilot) -> None:
    await settle(app, pilot)
    assert isinstance(app.screen, FleetScreen) and app.screen.loaded


async def test_filter_and_sort(engine) -> None:
    seed(engine, 6)
    app = EdgelabApp(engine, clock=lambda: NOW)
    async with app.run_test(size=SIZE) as pilot:
        await fleet_ready(app, pilot)
        assert names(app) == ["orin-agx-000", "orin-agx-002", "orin-agx-004", "s25-001", "s25-003", "s25-005"]
        row = [str(c) for c in table(app).get_row("s25-003")]
        assert row[:5] == ["s25-003", "npu_phone", "adb", "unauthorized", "VIRTUAL"]
        await pilot.press("slash")
        await pilot.press(*"s25 unauth")
        await settle(app, pilot)
        assert table(app).row_count == 1
        assert names(app) == ["s25-003"]
        await pilot.press("escape")  # clears the filter
        await settle(app, pilot)
        assert table(app).row_count == 6
        # sort: name -> class -> state -> last probe -> temperature (never-probed devices last)
        for _ in range(4):
            await pilot.press("s")
        assert app.screen.sort_key == "temperature"
        temps = [table(app).get_row(n)[6] for n in names(app)]
        assert [str(t) for t in temps] == ["46 C", "53 C", "67 C", "74 C", "-", "-"]
        await pilot.press("S")
        assert names(app)[:4] == ["orin-agx-004", "s25-003", "s25-001", "orin-agx-000"]


async def test_add_device_dialog(engine) -> None:
    app = EdgelabApp(engine)
    async with app.run_test(size=SIZE) as pilot:
        await fleet_ready(app, pilot)
        await pilot.press("a")
        await settle(app, pilot)
        assert isinstance(app.screen, AddDeviceScreen)
        await pilot.press(*"Bad Name!")
        app.screen.query_one("#address").value = "nvidia@127.0.0.11:2222"
        await pilot.press("enter")
        await settle(app, pilot)
        assert "invalid device name" in str(app.screen.query_one("#error").render())
        assert "bad-name" in str(app.screen.query_one("#error").render())  # the remedy suggests a valid name
        app.screen.query_one("#name").value = "orin-new"
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, FleetScreen) and "orin-new" in names(app)
    with session_scope(engine, write=False) as s:
        d = get_device(s, "orin-new")
        assert (d.transport, d.ssh_user, d.ssh_host, d.ssh_port) == ("ssh", "nvidia", "127.0.0.11", 2222)


async def test_probe_check_and_open_a_real_device(engine) -> None:
    with session_scope(engine) as s:
        add_device(s, Device(name="lab-host", transport="local"))
    app = EdgelabApp(engine, poll_s=0.5)
    async with app.run_test(size=SIZE) as pilot:
        await fleet_ready(app, pilot)
        assert str(table(app).get_row("lab-host")[5]) == "never"
        await pilot.press("c")
        await settle(app, pilot)
        assert str(table(app).get_row("lab-host")[3]) == "online"
        await pilot.press("p")
        await settle(app, pilot)
        assert str(table(app).get_row("lab-host")[5]) != "never"
        with session_scope(engine, write=False) as s:
            snaps = list_snapshots(s, "lab-host")
            assert len(snaps) == 1 and snaps[0].ok
            cls = get_device(s, "lab-host").device_class
        assert cls and str(table(app).get_row("lab-host")[1]) == cls
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, DeviceScreen) and app.screen.detail is not None
        detail = app.screen.detail
        assert detail.snapshot["id"] == snaps[0].id
        assert "os" in detail.facts and detail.profile["class"] == cls
        await pilot.press("escape")
        await settle(app, pilot)
        assert isinstance(app.screen, FleetScreen)


async def test_a_read_that_began_earlier_never_puts_older_rows_back(engine) -> None:
    """A fleet read begun before a probe was recorded can end after the read begun once it was (a
    thread worker runs on when a newer one replaces it): the older rows must not come back."""
    import dataclasses

    from edgelab.tui.messages import FleetLoaded
    from edgelab.views.fleet import load_fleet

    with session_scope(engine) as s:
        add_device(s, Device(name="lab-host", transport="local"))
    app = EdgelabApp(engine, poll_s=60)  # no poll of its own during the test
    async with app.run_test(size=SIZE) as pilot:
        await fleet_ready(app, pilot)
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        (row,) = load_fleet(engine)
        newer, older = dataclasses.replace(row, state="online"), dataclasses.replace(row, state="offline")
        base = fleet._shown_seq
        fleet.post_message(FleetLoaded([newer], base + 2))
        fleet.post_message(FleetLoaded([older], base + 1))  # began first, ended last
        await settle(app, pilot)
        assert str(table(app).get_row("lab-host")[3]) == "online"
        fleet.post_message(FleetLoaded([older], base + 3))  # a later read is shown, whatever it says
        await settle(app, pilot)
        assert str(table(app).get_row("lab-host")[3]) == "offline"


async def test_deploy_dry_run_shows_strategies_and_plan(engine) -> None:
    from edgelab.tui.screens.deploy import DeployScreen

    seed(engine, 2)
    app = EdgelabApp(engine, clock=lambda: NOW)
    async with app.run_test(size=SIZE) as pilot:
        await fleet_ready(app, pilot)
        await pilot.press("down")  # s25-001: a phone
        await pilot.press("d")
        await settle(app, pilot)
        assert isinstance(app.screen, DeployScreen) and app.screen.decisions is not None
        dlg = app.screen
        refused = {s["strategy"]: s for s in dlg.decisions["refused"]}
        assert "S1" in refused and "Jetson" in refused["S1"]["reason"]  # S1 refused on a phone, with why
        assert {s["strategy"] for s in dlg.decisions["eligible"]} >= {"S5"}
        await pilot.press("ctrl+d")
        await settle(app, pilot)
        assert dlg.planned is not None or str(dlg.query_one("#deploy-error").render())
        assert dlg.planned is not None, str(dlg.query_one("#deploy-error").render())
        assert dlg.planned["device"] == "s25-001" and dlg.planned["virtual"] is True
        assert dlg.planned["plan"]["strategy"] != "S1"
        assert dlg.query_one("#launch").disabled == bool(dlg.planned["refusal"])


async def test_fleet_shows_the_holder_and_reserves_and_releases(engine, monkeypatch) -> None:
    from edgelab.lease import acquire
    from edgelab.lease.owner import Holder

    seed(engine, 3)
    monkeypatch.setenv("EDGELAB_OWNER", "me@lab")
    acquire(engine, names=["s25-001"], ttl_s=600, holder=Holder("alice@lab1", "gitlab job 7"))
    app = EdgelabApp(engine, clock=lambda: NOW)
    async with app.run_test(size=SIZE) as pilot:
        await fleet_ready(app, pilot)
        held = str(table(app).get_row("s25-001")[-1])
        assert held.startswith("alice@lab1 (gitlab job 7) until ")
        assert str(table(app).get_row("orin-agx-000")[-1]) == ""
        table(app).move_cursor(row=names(app).index("orin-agx-000"))
        await pilot.press("l")
        await settle(app, pilot)
        assert str(table(app).get_row("orin-agx-000")[-1]).startswith("me@lab until ")
        await pilot.press("u")
        await settle(app, pilot)
        assert str(table(app).get_row("orin-agx-000")[-1]) == ""
        table(app).move_cursor(row=names(app).index("s25-001"))
        await pilot.press("u")  # someone else's lease: refused, still held
        await settle(app, pilot)
        assert app.screen.last_action is not None and "alice@lab1" in app.screen.last_action[0]
        assert not app.screen.last_action[1]
        assert str(table(app).get_row("s25-001")[-1]).startswith("alice@lab1")


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_deploy_dialog_fits_and_keeps_its_buttons_and_keys_in_view(engine, size) -> None:
    """At 80x24 and 160x48: the buttons and the footer's keys stay on the screen, the body scrolls,
    and a dry run scrolls its plan into view."""
    from textual.widgets import Button, Footer

    from edgelab.tui.screens.deploy import DeployScreen

    seed(engine, 2)
    app = EdgelabApp(engine, clock=lambda: NOW)
    async with app.run_test(size=size) as pilot:
        await fleet_ready(app, pilot)
        await pilot.press("down")
        await pilot.press("d")
        await settle(app, pilot)
        dlg = app.screen
        assert isinstance(dlg, DeployScreen)
        screen_region = dlg.region
        for button in dlg.query(Button):
            assert screen_region.contains_region(button.region), (size, button.id, button.region)
        footer = dlg.query_one(Footer)
        shown = {str(getattr(k, "description", "")) for k in footer.query("FooterKey")}
        assert {"Cancel", "Dry run", "Launch"} <= shown, shown  # the dialog's keys, in its footer
        assert footer.region.bottom == size[1] and footer.region.height >= 1
        await pilot.press("ctrl+d")
        await settle(app, pilot)
        assert dlg.planned is not None
        body, plan = dlg.query_one("#deploy-body"), dlg.query_one("#plan")
        assert body.scrollable_content_region.overlaps(plan.region)  # the plan is in view, not below the fold
        for button in dlg.query(Button):
            assert screen_region.contains_region(button.region), (size, button.id)
