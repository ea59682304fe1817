"""Trust an SSH host key: the offer shown with its fingerprint, trusted only when the operator says so.

Dismisses with True (trust it) or False. A changed key is shown but cannot be trusted from here:
that needs `edgelab device trust NAME --replace` after checking the device, on purpose.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from edgelab.tui.widgets.host_key import HostKeyCard


class TrustScreen(ModalScreen[bool]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, offer):
        super().__init__()
        self.offer = offer

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Trust this host key?", classes="title")
            yield HostKeyCard(self.offer, id="host-key")
            yield Static(
                "Compare it with the host's own (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub) "
                "before trusting it.",
                classes="note",
            )
            if self.offer.changed:
                yield Static(
                    f"refused here: verify the new key, then `edgelab device trust {self.offer.name} "
                    "--replace`",
                    classes="error",
                )
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Trust", variant="warning", id="trust", disabled=self.offer.changed)

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()  # trusting takes a deliberate choice

    def action_cancel(self) -> None:
        self.dismiss(False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "trust" and not self.offer.changed)
