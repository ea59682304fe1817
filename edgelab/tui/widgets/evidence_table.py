"""The runs a matrix cell cites, each with its VIRTUAL flag; enter opens the run."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from rich.text import Text
from textual.widgets import DataTable

from edgelab.inventory.view import ago
from edgelab.states import RunState
from edgelab.views.matrix import EvidenceRun

COLUMNS = ("run", "device", "state", "virtual", "counts as", "created")


def evidence_cells(e: EvidenceRun, now: datetime) -> tuple:
    state = Text(
        e.state,
        style={RunState.FINISHED: "green", RunState.FAILED: "red", "missing": "bold red"}.get(e.state, ""),
    )
    if e.virtual:
        role = Text("demonstration", style="yellow")
    elif e.state == "missing":
        role = Text("nothing (run gone)", style="red")
    else:
        role = Text("evidence")
    return (
        e.id,
        e.device or "-",
        state,
        Text("VIRTUAL", style="bold yellow") if e.virtual else "",
        role,
        ago(e.created_at, now) if e.created_at else "-",
    )


class EvidenceTable(DataTable):
    def __init__(self, clock: Callable[[], datetime], **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._clock = clock
        self._shown: tuple = ()

    def on_mount(self) -> None:
        for col in COLUMNS:
            self.add_column(col, key=col)

    def show(self, runs: tuple[EvidenceRun, ...]) -> None:
        if runs == self._shown:
            return
        self._shown = runs
        self.clear()
        now = self._clock()
        seen: set[str] = set()
        for e in runs:
            if e.id in seen:  # cited twice (evidence and demonstration): one row, keys are unique
                continue
            seen.add(e.id)
            self.add_row(*evidence_cells(e, now), key=e.id)

    def selected_run(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # noqa: BLE001 - no valid cursor
            return None
