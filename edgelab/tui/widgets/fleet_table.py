"""The devices table: one row per device, redrawn only when the data changed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from rich.text import Text
from textual.widgets import DataTable

from edgelab.inventory.view import ago
from edgelab.safetext import printable
from edgelab.views.fleet import FleetRow

COLUMNS = ("name", "class", "transport", "state", "virtual", "last probe", "temp", "held by")

STATE_STYLE = {
    "online": "green",
    "busy": "bold cyan",
    "offline": "red",
    "unauthorized": "yellow",
    "untrusted": "yellow",
    "auth-failed": "yellow",
    "absent": "red",
    "error": "red",
    "unknown": "dim",
}


def state_text(state: str) -> Text:
    return Text(printable(state), style=STATE_STYLE.get(state, ""))


class FleetTable(DataTable):
    """Device rows keyed by name, so the cursor stays on its device across refreshes."""

    def __init__(self, clock: Callable[[], datetime], **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._clock = clock
        self._shown: tuple = ()

    def on_mount(self) -> None:
        for col in COLUMNS:
            self.add_column(col, key=col)

    def cells(self, r: FleetRow, now: datetime) -> tuple:
        if r.last_probe is None:
            probe = Text("never", style="dim")
        else:
            probe = Text(ago(r.last_probe, now), style="" if r.probe_ok else "red")
        temp = Text("-", style="dim") if r.temperature_c is None else Text(f"{r.temperature_c:.0f} C")
        if r.temperature_c is not None and r.temperature_c >= 80:
            temp.stylize("bold red")
        return (  # words from the database: as plain text, control characters escaped (safetext)
            Text(printable(r.name)),
            Text(printable(r.device_class)) if r.device_class else Text("?", style="dim"),
            Text(printable(r.transport)),
            state_text(r.state),
            Text("VIRTUAL", style="bold yellow") if r.virtual else "",
            probe,
            temp,
            Text(printable(r.held), style="magenta"),
        )

    def show(self, rows: list[FleetRow]) -> None:
        """Replace the rows (keeps the cursor on the same device when it is still shown)."""
        now = self._clock()
        key = tuple((r, ago(r.last_probe, now) if r.last_probe else None) for r in rows)
        if key == self._shown:
            return
        self._shown = key
        current = self.selected_name()
        self.clear()
        for r in rows:
            self.add_row(*self.cells(r, now), key=r.name)
        if current is not None:
            names = [r.name for r in rows]
            if current in names:
                self.move_cursor(row=names.index(current))

    def selected_name(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # noqa: BLE001 - no valid cursor
            return None
