"""Add a device: name, transport, address, route (jump host / adb server), class, tags; validated by
the inventory layer, not here.

Dismisses with the new device's name, or None when cancelled. Errors stay in the dialog
with their remedy so the operator can fix the field and submit again.
"""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from edgelab.errors import EdgelabError
from edgelab.inventory.build import DEVICE_CLASSES
from edgelab.tui.messages import ActionDone
from edgelab.tui.widgets.route_fields import RouteFields


def add_device_row(
    engine,
    name: str,
    transport: str,
    address: str,
    device_class: str | None,
    tags: list[str],
    *,
    jump: str | None = None,
    adb_server: str | None = None,
) -> str:
    """Build and store the row exactly as `edgelab device add` does; EdgelabError on bad input."""
    from edgelab.inventory.build import build_device
    from edgelab.store.db import session_scope
    from edgelab.store.devices import add_device

    common = {"device_class": device_class, "tags": tags}
    device = build_device(transport, name, address, jump=jump, adb_server=adb_server, **common)
    with session_scope(engine) as s:
        return add_device(s, device).name


class AddDeviceScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    # the fields scroll, the error and the buttons stay in view on a short terminal
    DEFAULT_CSS = "#add-fields { height: auto; max-height: 65vh; }"

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Add a device", classes="title")
            with VerticalScroll(id="add-fields"):
                yield Label("name")
                yield Input(placeholder="e.g. orin-agx-2", id="name")
                yield Label("transport")
                yield Select([("ssh", "ssh"), ("adb", "adb")], value="ssh", allow_blank=False, id="transport")
                yield Label("address: [user@]host[:port] for ssh, the serial for adb")
                yield Input(placeholder="nvidia@192.168.1.20", id="address")
                yield RouteFields(id="route")
                yield Label("class (optional: the probe finds it)")
                yield Select([(c, c) for c in DEVICE_CLASSES], prompt="unknown until probed", id="class")
                yield Label("tags (space separated)")
                yield Input(id="tags")
            yield Static("", id="error", classes="error")
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Add", variant="primary", id="add")

    def on_mount(self) -> None:
        self.query_one("#name", Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
        else:
            self._submit()

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        self._submit()

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "transport":
            self.query_one(RouteFields).transport = str(event.value)

    def _submit(self) -> None:
        cls = self.query_one("#class", Select).value
        jump, adb_server = self.query_one(RouteFields).values()
        self._add(
            self.query_one("#name", Input).value.strip(),
            str(self.query_one("#transport", Select).value),
            self.query_one("#address", Input).value.strip(),
            cls if isinstance(cls, str) else None,
            self.query_one("#tags", Input).value.split(),
            jump,
            adb_server,
        )

    @work(thread=True, exclusive=True, group="add-device")
    def _add(
        self,
        name: str,
        transport: str,
        address: str,
        device_class: str | None,
        tags: list[str],
        jump: str | None,
        adb_server: str | None,
    ) -> None:
        try:
            added = add_device_row(
                self.app.engine,
                name,
                transport,
                address,
                device_class,
                tags,
                jump=jump,
                adb_server=adb_server,
            )
        except EdgelabError as err:
            text = f"{err}" + (f"\n-> {err.remedy}" if err.remedy else "")
            self.post_message(ActionDone("add", name, False, text))
            return
        self.post_message(ActionDone("add", added, True, f"added {added}"))

    def on_action_done(self, message: ActionDone) -> None:
        if message.ok:
            self.dismiss(message.target)
        else:
            self.query_one("#error", Static).update(message.text)
