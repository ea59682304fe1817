"""The fleet: every device with state, class, virtual marker, last probe and temperature.

Reads the database in a worker every ``app.poll_s`` seconds; probe and check run in
workers too and write their outcome to the database, which the next read shows.
"""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input

from edgelab.tui import actions
from edgelab.tui.messages import ActionDone, FleetLoaded
from edgelab.tui.widgets.filter_bar import FilterBar
from edgelab.tui.widgets.fleet_table import FleetTable
from edgelab.tui.widgets.status_line import StatusLine
from edgelab.views.fleet import SORT_KEYS, filter_rows, load_fleet, sort_rows


class FleetScreen(Screen):
    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding("s", "sort", "Sort"),
        Binding("S", "reverse", "Reverse", show=False),
        Binding("p", "probe", "Probe"),
        Binding("c", "check", "Check"),
        Binding("C", "check_all", "Check all", show=False),
        Binding("enter", "open", "Open", show=False),
        Binding("a", "add", "Add device"),
        Binding("d", "deploy", "Deploy"),
        Binding("l", "reserve", "Reserve 30m"),
        Binding("u", "release", "Release"),
        Binding("R", "runs", "Runs"),
        Binding("r", "refresh", "Refresh", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.rows: list = []
        self.sort_key = "name"
        self.reverse = False
        self.loaded = False
        self.busy: set[str] = set()  # devices with a probe/check in flight
        self.last_action: tuple[str, bool] | None = None
        # reads are numbered as they begin: a read begun before a probe was recorded may end after
        # the one begun once it was (a thread worker runs on when a newer one replaces it), and
        # must not put the older rows back
        self._load_seq = self._shown_seq = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield FilterBar()
        yield FleetTable(self.app.clock, id="fleet")
        yield StatusLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(FleetTable).focus()
        self.action_refresh()
        self.set_interval(self.app.poll_s, self.action_refresh)

    # ------------------------------------------------------------ data

    def action_refresh(self) -> None:
        self._load_seq += 1
        self._load(self._load_seq)

    @work(thread=True, exclusive=True, group="fleet-load")
    def _load(self, seq: int) -> None:
        self.post_message(FleetLoaded(load_fleet(self.app.engine), seq))

    def on_fleet_loaded(self, message: FleetLoaded) -> None:
        if message.seq < self._shown_seq:
            return  # older than what is shown
        self._shown_seq = message.seq
        self.rows = message.rows
        self.loaded = True
        self._show()

    def _show(self) -> None:
        query = self.query_one(FilterBar).value
        shown = sort_rows(filter_rows(self.rows, query), self.sort_key, self.reverse)
        self.query_one(FleetTable).show(shown)
        online = sum(1 for r in self.rows if r.state in ("online", "busy"))
        virtual = sum(1 for r in self.rows if r.virtual)
        text = f"{len(shown)} of {len(self.rows)} devices, {online} online"
        if virtual:
            text += f", {virtual} VIRTUAL"
        text += f"  |  sort: {self.sort_key}{' (reversed)' if self.reverse else ''}"
        if query:
            text += f"  |  filter: {query}"
        if self.busy:
            text += f"  |  working: {', '.join(sorted(self.busy))}"
        error = False
        if self.last_action:
            text += f"  |  {self.last_action[0]}"
            error = not self.last_action[1]
        self.query_one(StatusLine).say(text, error=error)

    # ------------------------------------------------------------ filter and sort

    def action_filter(self) -> None:
        self.query_one(FilterBar).open()

    def on_input_changed(self, event: Input.Changed) -> None:
        if isinstance(event.input, FilterBar):
            self._show()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if isinstance(event.input, FilterBar):
            self.query_one(FleetTable).focus()

    def action_sort(self) -> None:
        self.sort_key = SORT_KEYS[(SORT_KEYS.index(self.sort_key) + 1) % len(SORT_KEYS)]
        self._show()

    def action_reverse(self) -> None:
        self.reverse = not self.reverse
        self._show()

    # ------------------------------------------------------------ actions on devices

    def _selected(self) -> str | None:
        name = self.query_one(FleetTable).selected_name()
        if name is None:
            self.notify("no device selected", severity="warning")
        return name

    def action_open(self) -> None:
        name = self._selected()
        if name:
            self.app.open_device(name)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key is not None and event.row_key.value:
            self.app.open_device(event.row_key.value)

    def action_probe(self) -> None:
        name = self._selected()
        if name and name not in self.busy:
            self.busy.add(name)
            self._show()
            self._probe(name)

    @work(thread=True, group="device-action")
    def _probe(self, name: str) -> None:
        ok, text = actions.probe(self.app.engine, name)
        self.post_message(ActionDone("probe", name, ok, text))

    def action_check(self) -> None:
        name = self._selected()
        if name and name not in self.busy:
            self.busy.add(name)
            self._show()
            self._check([name], name)

    def action_check_all(self) -> None:
        if "all" not in self.busy:
            self.busy.add("all")
            self._show()
            self._check(None, "all")

    @work(thread=True, group="device-action")
    def _check(self, names: list[str] | None, label: str) -> None:
        ok, text = actions.check(self.app.engine, names)
        self.post_message(ActionDone("check", label, ok, text))

    def on_action_done(self, message: ActionDone) -> None:
        self.busy.discard(message.target)
        self.notify(message.text, severity="information" if message.ok else "error", timeout=6)
        self.last_action = (message.text, message.ok)
        self._show()
        self.action_refresh()

    def action_reserve(self) -> None:
        name = self._selected()
        if name and name not in self.busy:
            self.busy.add(name)
            self._lease(name, True)

    def action_release(self) -> None:
        name = self._selected()
        if name and name not in self.busy:
            self.busy.add(name)
            self._lease(name, False)

    @work(thread=True, group="device-action")
    def _lease(self, name: str, take: bool) -> None:
        ok, text = (actions.reserve if take else actions.release)(self.app.engine, name)
        self.post_message(ActionDone("reserve" if take else "release", name, ok, text))

    def action_add(self) -> None:
        from edgelab.tui.screens.add_device import AddDeviceScreen

        def added(name: str | None) -> None:
            if name:
                self.notify(f"added {name}")
                self.action_refresh()

        self.app.push_screen(AddDeviceScreen(), added)

    def action_deploy(self) -> None:
        from edgelab.tui.screens.deploy import DeployScreen

        name = self._selected()
        if name:
            self.app.push_screen(DeployScreen(name))

    def action_runs(self) -> None:
        from edgelab.tui.screens.runs import RunsScreen

        self.app.push_screen(RunsScreen())
