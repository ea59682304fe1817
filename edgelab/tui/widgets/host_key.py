"""An SSH host key on offer: whose it is (the device, or a lab host on the way), its type and SHA256
fingerprint, and what is recorded already, for the operator to compare before trusting it."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static


class HostKeyCard(Static):
    """Renders one ``inventory.trust.TrustOffer``."""

    def __init__(self, offer, **kwargs):
        super().__init__("", **kwargs)
        self.offer = offer

    def on_mount(self) -> None:
        o = self.offer
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column("key", style="bold", no_wrap=True)
        table.add_column("value", overflow="fold")
        who = f"lab host {o.via} (on the way to {o.name})" if o.via else o.name
        table.add_row("host", Text(f"{who} at {o.host}:{o.port}"))
        table.add_row("key type", Text(o.key_type))
        table.add_row("fingerprint", Text(o.fingerprint, style="bold"))
        if o.changed:
            table.add_row(
                "recorded", Text(f"{o.recorded_fingerprint}: the host key CHANGED", style="bold red")
            )
        elif o.already_trusted:
            table.add_row("recorded", Text("already trusted", style="green"))
        else:
            table.add_row("recorded", Text("nothing: unknown host key", style="yellow"))
        self.update(table)
