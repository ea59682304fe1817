"""The qualification matrix: 12 device configurations x 5 pipelines, each cell's status and evidence.

Read in a worker (data.load_matrix) every ``app.poll_s`` seconds, so `edgelab matrix set` or a
playbook in another terminal shows up here. Cells backed only by virtual-device runs are marked
"(v)" and never drawn as qualified. The detail pane follows the cursor; enter on an evidence
run opens the Run screen.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from edgelab.errors import EdgelabError
from edgelab.tui.widgets.evidence_table import EvidenceTable
from edgelab.tui.widgets.info_panel import InfoPanel
from edgelab.tui.widgets.matrix_grid import LEGEND, MatrixGrid, status_style
from edgelab.tui.widgets.status_line import StatusLine
from edgelab.views.matrix import MatrixCellView, load_matrix, stage_label


@dataclass
class MatrixLoaded(Message):
    """A fresh read of the matrix (list of data.MatrixCellView), or the error that stopped it."""

    cells: list
    error: str | None = None


def detail_pairs(cell: MatrixCellView) -> list[tuple[str, Text | str]]:
    """What the detail pane says about one cell: ladder stage, both status words, why, what next."""

    def word(w: str | None) -> Text:
        return Text(w or "-", style=status_style(w))

    stage = Text(
        stage_label(cell),
        style="bold red" if cell.stage == "qualified" and not cell.qualified else status_style(cell.stage),
    )
    if cell.virtual_only:
        stage.append(
            "  (v) virtual evidence only: demonstrates the machinery, qualifies nothing", style="yellow"
        )
    real = sum(1 for e in cell.evidence if not e.virtual and not e.demo and e.state != "missing")
    updated = (
        "seeded"
        if cell.updated_by == "seed"
        else (f"{cell.updated_at:%Y-%m-%d %H:%M} UTC by {cell.updated_by or '?'}" if cell.updated_at else "-")
    )
    return [
        ("cell", Text(cell.id, style="bold")),
        ("device config", f"{cell.row}. {cell.row_label}"),
        ("pipeline", f"{cell.col}. {cell.col_label} ({cell.pipeline})"),
        ("stage", stage),
        ("functional", word(cell.functional)),
        ("performance", word(cell.performance)),
        (
            "failing layer",
            (cell.failing_layer or "-") + (f" ({cell.blocker_kind})" if cell.blocker_kind else ""),
        ),
        ("reason", cell.reason or "-"),
        ("next step" if cell.stage == "none" else "next experiment", cell.next_experiment or "-"),
        ("evidence", f"{real} real-device run(s), {len(cell.evidence) - real} virtual/missing"),
        ("updated", updated),
    ]


class MatrixScreen(Screen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "refresh", "Refresh", show=False),
    ]
    DEFAULT_CSS = """
    #matrix-bottom { height: 13; }
    #matrix-detail { width: 1fr; height: 100%; }
    #matrix-evidence { width: 1fr; border: round $primary 40%; }
    #matrix-trend { width: 1fr; height: 100%; border: round $primary 40%; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[MatrixCellView] = []
        self.loaded = False
        self.current: MatrixCellView | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Qualification matrix: device configurations x pipelines", classes="title")
        yield MatrixGrid(id="matrix-grid")
        with Horizontal(id="matrix-bottom"):
            yield InfoPanel("cell", id="matrix-detail")
            yield EvidenceTable(self.app.clock, id="matrix-evidence")
            yield Static(Text("no finished runs of this cell to plot", style="dim"), id="matrix-trend")
        yield Static(Text(LEGEND, style="dim"), id="matrix-legend", classes="note")
        yield StatusLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#matrix-evidence").border_title = "evidence runs (enter opens)"
        self.query_one("#matrix-trend").border_title = "trend (last runs, baseline line)"
        self.query_one(MatrixGrid).focus()
        self.query_one(StatusLine).say("loading the matrix...")
        self.action_refresh()
        self.set_interval(self.app.poll_s, self.action_refresh)

    def action_refresh(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="matrix-load")
    def _load(self) -> None:
        try:
            self.post_message(MatrixLoaded(load_matrix(self.app.engine)))
        except EdgelabError as err:
            self.post_message(MatrixLoaded([], f"{err}" + (f" -> {err.remedy}" if err.remedy else "")))

    def on_matrix_loaded(self, message: MatrixLoaded) -> None:
        if message.error:
            self.query_one(StatusLine).say(message.error, error=True)
            return
        self.cells = message.cells
        grid = self.query_one(MatrixGrid)
        grid.show(self.cells)
        self.loaded = True
        self._show_detail(grid.selected())
        qualified = sum(1 for c in self.cells if c.qualified)
        virtual = sum(1 for c in self.cells if c.virtual_only)
        blocked = sum(1 for c in self.cells if c.stage in ("blocked", "rejected"))
        self.query_one(StatusLine).say(
            f"{len(self.cells)} cells, {qualified} qualified, {blocked} blocked/rejected, "
            f"{virtual} with virtual evidence only; enter on a cell goes to its runs, tab switches"
        )

    def on_data_table_cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        if isinstance(event.data_table, MatrixGrid):
            self._show_detail(event.data_table.selected())

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        """Enter on a cell moves to its evidence runs."""
        if isinstance(event.data_table, MatrixGrid):
            table = self.query_one(EvidenceTable)
            if table.row_count:
                table.focus()
            else:
                self.notify("this cell cites no runs yet", severity="warning")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if isinstance(event.data_table, EvidenceTable):
            run_id = event.row_key.value
            if run_id and any(
                e.id == run_id and e.state != "missing"
                for e in (self.current.evidence if self.current else ())
            ):
                self.app.open_run(run_id)
            else:
                self.notify(f"run {run_id} is not in the database", severity="error")

    def _show_detail(self, cell: MatrixCellView | None) -> None:
        panel = self.query_one("#matrix-detail", InfoPanel)
        table = self.query_one(EvidenceTable)
        self.current = cell
        if cell is None:
            panel.show_note("move onto a cell to see its stage, status, reason and evidence")
            table.show(())
            return
        panel.border_title = f"cell {cell.row}/{cell.col}"
        panel.show_pairs(detail_pairs(cell))
        table.show(cell.evidence)
        self._trend(cell)

    @work(thread=True, exclusive=True, group="matrix-trend")
    def _trend(self, cell: MatrixCellView) -> None:
        """The cell's pipeline on the device of its newest evidence run, drawn off the UI thread."""
        from edgelab.views.trend import load_trend

        runs = sorted((e for e in cell.evidence if e.device and e.state != "missing"), key=lambda e: e.id)
        view = None
        if runs:
            newest = max(runs, key=lambda e: e.created_at.timestamp() if e.created_at else 0.0)
            try:
                view = load_trend(self.app.engine, newest.device or "", newest.pipeline or cell.pipeline)
            except EdgelabError:
                view = None
        text = view.text(width=44, height=10) if view else "no finished runs of this cell to plot"
        self.app.call_from_thread(
            self.query_one("#matrix-trend", Static).update, Text(text, style="" if view else "dim")
        )
