"""Pilot tests of the shared-lab parts of the TUI: the add-device dialog's jump host and adb server, and
the device page's trust action for an unknown host key (a real sshd: the virtual lab's), which shows the
SHA256 fingerprint and records the key only when the operator says so."""

from __future__ import annotations

import pytest
from tui_wait import settle

from edgelab.store.db import dispose_engines, get_engine, session_scope
from edgelab.store.devices import add_device, get_device, record_state
from edgelab.store.models import Device
from edgelab.tui.app import EdgelabApp
from edgelab.tui.screens.add_device import AddDeviceScreen
from edgelab.tui.screens.device import DeviceScreen
from edgelab.tui.screens.fleet import FleetScreen
from edgelab.tui.screens.trust import TrustScreen
from edgelab.tui.widgets.host_key import HostKeyCard
from edgelab.tui.widgets.route_fields import RouteFields

SIZE = (150, 50)


@pytest.fixture
def engine(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGELAB_HOME", str(tmp_path / "home"))  # edgelab's own known_hosts starts empty
    monkeypatch.delenv("EDGELAB_SIM_DIR", raising=False)
    eng = get_engine(str(tmp_path / "lab.db"))
    yield eng
    dispose_engines()


def text_of(widget) -> str:
    """What a Static shows, as plain text (its content may be a Rich table)."""
    import io

    from rich.console import Console

    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(widget.content)
    return console.export_text()


async def _open_add(app, pilot) -> AddDeviceScreen:
    await settle(app, pilot)
    assert isinstance(app.screen, FleetScreen) and app.screen.loaded
    await pilot.press("a")
    await settle(app, pilot)
    assert isinstance(app.screen, AddDeviceScreen)
    return app.screen


async def test_add_device_takes_a_jump_host_for_ssh(engine) -> None:
    app = EdgelabApp(engine)
    async with app.run_test(size=SIZE) as pilot:
        dlg = await _open_add(app, pilot)
        route = dlg.query_one(RouteFields)
        assert dlg.query_one("#route-ssh").display and not dlg.query_one("#route-adb").display
        dlg.query_one("#name").value = "orin-far"
        dlg.query_one("#address").value = "nvidia@127.0.0.11:2222"
        dlg.query_one("#jump").value = "bob:pw1234@labhost2"  # a password: refused, not echoed
        await pilot.press("enter")
        await settle(app, pilot)
        assert "never stores secrets" in str(dlg.query_one("#error").render())
        assert "pw1234" not in str(dlg.query_one("#error").render())
        dlg.query_one("#jump").value = "bob@labhost2,labhost3:2200"
        assert route.values() == ("bob@labhost2,labhost3:2200", None)
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, FleetScreen)
    with session_scope(engine, write=False) as s:
        d = get_device(s, "orin-far")
        assert (d.transport, d.ssh_host, d.ssh_port, d.ssh_jump) == (
            "ssh",
            "127.0.0.11",
            2222,
            "bob@labhost2,labhost3:2200",
        )


@pytest.mark.parametrize(
    "server,stored", [("10.0.0.2", "10.0.0.2:5037"), ("ssh://bob@labhost2", "ssh://bob@labhost2/5037")]
)
async def test_add_device_takes_an_adb_server_for_adb(engine, server, stored) -> None:
    app = EdgelabApp(engine)
    async with app.run_test(size=SIZE) as pilot:
        dlg = await _open_add(app, pilot)
        dlg.query_one("#transport").value = "adb"
        await settle(app, pilot)
        assert dlg.query_one("#route-adb").display and not dlg.query_one("#route-ssh").display
        dlg.query_one("#name").value = "s25-far"
        dlg.query_one("#address").value = "R5CX1234"
        dlg.query_one("#jump").value = "ignored-for-adb"
        dlg.query_one("#adb-server").value = server
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, FleetScreen)
    with session_scope(engine, write=False) as s:
        d = get_device(s, "s25-far")
        assert (d.transport, d.adb_serial, d.adb_server, d.ssh_jump) == ("adb", "R5CX1234", stored, None)


@pytest.mark.ssh
async def test_device_page_offers_trust_for_an_unknown_host_key(engine, ssh_lab) -> None:
    from edgelab.config import known_hosts_path

    dev = ssh_lab.device("orin-agx")
    with session_scope(engine) as s:
        add_device(
            s,
            Device(
                name="orin-unknown",
                transport="ssh",
                ssh_user=ssh_lab.user,
                ssh_host=dev.address,
                ssh_port=dev.port,
            ),
        )
        record_state(s, "orin-unknown", "untrusted", "unknown host key")
    app = EdgelabApp(engine)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.open_device("orin-unknown")
        await settle(app, pilot)
        assert isinstance(app.screen, DeviceScreen) and app.screen.detail is not None
        assert "press t" in text_of(app.screen.query_one("#device-info"))
        page = app.screen
        await pilot.press("t")
        await settle(app, pilot)
        assert isinstance(app.screen, TrustScreen)
        card = app.screen.query_one(HostKeyCard)
        shown = text_of(card)
        assert ssh_lab.host_key_fingerprint in shown and "unknown host key" in shown
        await pilot.press("escape")  # cancelled: nothing recorded
        await settle(app, pilot)
        assert app.screen is page
        with session_scope(engine, write=False) as s:
            assert get_device(s, "orin-unknown").host_key_fingerprint is None
        assert not known_hosts_path().exists()
        await pilot.press("t")
        await settle(app, pilot)
        assert isinstance(app.screen, TrustScreen)
        app.screen.query_one("#trust").press()
        await settle(app, pilot)
        assert app.screen is page and not page.working
    with session_scope(engine, write=False) as s:
        d = get_device(s, "orin-unknown")
        assert d.host_key_fingerprint == ssh_lab.host_key_fingerprint
    assert f"[{dev.address}]:{dev.port} ssh-ed25519" in known_hosts_path().read_text()
