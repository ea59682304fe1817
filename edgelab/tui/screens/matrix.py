"""The qualification matrix (12 device rows x 5 model columns): a placeholder until the matrix issue lands.

It says so plainly rather than drawing cells with invented statuses.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from edgelab.tui.data import optional_module

NOT_YET = (
    "The qualification matrix is not available yet: the matrix issue has not landed.\n\n"
    "When it does, this page shows 12 device rows x 5 model columns, each cell with its functional and "
    "performance status (PASS, PARTIAL, COMPONENT, PROFILE_ONLY, FAILED, REJECTED, BLOCKED) linked to the "
    "runs that prove it. Runs on VIRTUAL devices demonstrate the machinery and never qualify a cell."
)


class MatrixScreen(Screen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Qualification matrix", classes="title")
        landed = optional_module("edgelab.matrix") is not None
        yield Static(NOT_YET if not landed else "edgelab.matrix is installed; this screen does not render it yet.",
                     classes="note", id="matrix-note")
        yield Footer()
