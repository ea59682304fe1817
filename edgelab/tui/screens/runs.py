"""Runs, newest first, of one device or of the whole fleet; enter opens the one under the cursor.

The device page's enter opens only its newest run; a run still going while newer ones were
started (the demo's deployment) is reached here. The rows are the read model's
(edgelab.views.device.list_run_rows), times in the operator's time zone.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from edgelab.states import RunState
from edgelab.views.device import list_run_rows

COLUMNS = ("run", "started", "device", "pipeline", "strategy", "runtime", "kind", "state")
STATE_STYLE = {
    RunState.RUNNING: "green",
    RunState.FINISHED: "cyan",
    RunState.FAILED: "red",
    RunState.STOPPED: "yellow",
}


class RunsLoaded(Message):
    def __init__(self, rows: list[dict]):
        super().__init__()
        self.rows = rows


class RunsScreen(Screen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("enter", "open", "Open run"),
        Binding("r", "refresh", "Refresh"),
    ]

    def __init__(self, device: str | None = None):
        super().__init__()
        self.device = device
        self.rows: list[dict] = []
        self.loaded = False

    def compose(self) -> ComposeResult:
        yield Header()
        what = f"runs of {self.device}" if self.device else "runs of the fleet"
        yield Static(Text(what, style="bold"), id="runs-title", classes="title")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(*COLUMNS)
        table.focus()
        self.action_refresh()

    def action_refresh(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="runs-load")
    def _load(self) -> None:
        self.post_message(RunsLoaded(list_run_rows(self.app.engine, self.device)))

    def on_runs_loaded(self, message: RunsLoaded) -> None:
        self.rows, self.loaded = message.rows, True
        table = self.query_one(DataTable)
        keep = table.cursor_row
        table.clear()
        for r in message.rows:
            table.add_row(
                r["id"],
                r["started"],
                (r["device"] or "-") + (" (v)" if r["virtual"] else ""),
                r["pipeline"] or "-",
                r["strategy"],
                r["runtime"],
                r["kind"],
                Text(r["state"], style=STATE_STYLE.get(r["state"], "")),
                key=r["id"],
            )
        if message.rows:
            table.move_cursor(row=min(keep, len(message.rows) - 1))
        else:
            self.query_one("#runs-title", Static).update(Text("no runs yet", style="dim"))

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if not self.rows:
            self.notify("no run to open", severity="warning")
            return
        self.app.open_run(str(self.rows[table.cursor_row]["id"]))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.app.open_run(str(event.row_key.value))
