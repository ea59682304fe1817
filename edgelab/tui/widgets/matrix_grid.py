"""The 12 x 5 qualification grid: one row per device configuration, one column per pipeline.

Each cell shows its functional status word (or the stage reached when it has none) and its
performance status, coloured by status. A cell whose only evidence is virtual is marked
"(v)" and never drawn as qualified, whatever its stage says.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from edgelab.views.matrix import MatrixCellView, cell_words

LABEL_COL = "row"
LABEL_WIDTH = 38  # long configuration names are cropped here; the detail pane shows them whole

WORD_STYLE = {
    "PASS": "green",
    "PARTIAL": "yellow",
    "COMPONENT": "cyan",
    "PROFILE_ONLY": "blue",
    "FAILED": "bold red",
    "BLOCKED": "red",
    "REJECTED": "magenta",
}
STAGE_STYLE = {
    "none": "dim",
    "artifact_ready": "cyan",
    "correct": "cyan",
    "executes": "green",
    "profiled": "green",
    "qualified": "bold green",
    "blocked": "red",
    "rejected": "magenta",
}
VIRTUAL_STYLE = "yellow italic"
LEGEND = (
    "line 1: functional status (or stage reached)  perf: performance status  "
    "(v): virtual evidence only, never qualifies  *: qualified on a real device"
)


def status_style(word: str | None) -> str:
    """The colour of a status word or stage name (used by the detail pane too)."""
    if not word:
        return "dim"
    return WORD_STYLE.get(word) or STAGE_STYLE.get(word, "")


TONE_STYLE = {"qualified": "bold green", "unproven": "bold red"}


def cell_text(cell: MatrixCellView) -> Text:
    """The read model's two lines (edgelab.views.matrix.cell_words), coloured by status."""
    w = cell_words(cell)
    first = Text(w.first, style=TONE_STYLE.get(w.tone or "") or status_style(w.tone))
    if w.virtual:
        first.append(" (v)", style=VIRTUAL_STYLE)
    if w.second_is_performance:
        second = Text("perf ", style="dim") + Text(w.second, style=status_style(w.second_tone))
    else:
        second = Text(w.second, style="dim") if w.second else Text("")
    return first + Text("\n") + second


class MatrixGrid(DataTable):
    """Cells keyed by (row_key, pipeline); refreshes update cells in place so the cursor stays put."""

    def __init__(self, **kwargs):
        super().__init__(cursor_type="cell", zebra_stripes=True, header_height=2, **kwargs)
        self._shown: dict[str, MatrixCellView] = {}
        self.cells_by_key: dict[tuple[str, str], MatrixCellView] = {}

    def show(self, cells: list[MatrixCellView]) -> None:
        by_id = {c.id: c for c in cells}
        if by_id == self._shown:
            return
        self.cells_by_key = {(c.row_key, c.pipeline): c for c in cells}
        layout_same = self._shown.keys() == by_id.keys()
        self._shown = by_id
        if layout_same and self.row_count:
            for c in cells:
                self.update_cell(c.row_key, c.pipeline, cell_text(c))
            return
        self.clear(columns=True)
        self.add_column("device configuration", key=LABEL_COL, width=LABEL_WIDTH)
        columns = sorted({(c.col, c.pipeline, c.col_label) for c in cells})
        for _, key, label in columns:
            self.add_column(Text(f"{label}\n{key}"), key=key)
        rows = sorted({(c.row, c.row_key, c.row_label) for c in cells})
        for idx, key, label in rows:
            values = [Text(f"{idx:>2} {label}")]
            for _, pipeline, _ in columns:
                c = self.cells_by_key.get((key, pipeline))
                values.append(cell_text(c) if c else Text("?", style="dim"))
            self.add_row(*values, key=key, height=2)
        if columns and rows:
            self.move_cursor(row=0, column=1)

    def selected(self) -> MatrixCellView | None:
        """The cell under the cursor (None on the row-label column or an empty grid)."""
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate)
        except Exception:  # noqa: BLE001 - no valid cursor
            return None
        return self.cells_by_key.get((key.row_key.value, key.column_key.value))
