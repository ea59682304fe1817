"""How a device is reached beyond its own address: a jump host for SSH, an adb server for ADB.

One input per transport, only the one that applies shown; the values go to the inventory's
builders untouched (they validate them, and refuse a password typed into either).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Input, Label


class RouteFields(Vertical):
    """The route inputs of the add-device dialog; ``transport`` picks which one shows."""

    DEFAULT_CSS = "RouteFields { height: auto; }"
    transport: reactive[str] = reactive("ssh")

    def compose(self) -> ComposeResult:
        with Vertical(id="route-ssh"):
            yield Label(
                "jump host (optional): [user@]host[:port], comma-separated for a chain; ~/.ssh/config "
                "names work",
                markup=False,
            )
            yield Input(placeholder="labhost2, or nvidia@10.0.0.2:22", id="jump")
        with Vertical(id="route-adb"):
            yield Label(
                "adb server (optional): host:port, or ssh://[user@]labhost[:port][/adb_port] tunnelled "
                "over SSH",
                markup=False,
            )
            yield Input(placeholder="the local one; e.g. 10.0.0.2:5037 or ssh://labhost2", id="adb-server")

    def watch_transport(self, transport: str) -> None:
        for kind in ("ssh", "adb"):
            for box in self.query(f"#route-{kind}"):
                box.display = transport == kind

    def on_mount(self) -> None:
        self.watch_transport(self.transport)

    def values(self) -> tuple[str | None, str | None]:
        """(jump host, adb server) for the chosen transport; None where blank or not applicable."""
        jump = self.query_one("#jump", Input).value.strip()
        server = self.query_one("#adb-server", Input).value.strip()
        if self.transport == "ssh":
            return jump or None, None
        return None, server or None
