"""The Textual app: holds the database engine and the clock, opens on the fleet screen.

The engine is created by the caller (CLI, tests, bench) so the app never guesses a database;
``clock`` is injectable so snapshot tests render fixed "ago" texts.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine
from textual.app import App
from textual.binding import Binding


def _utcnow() -> datetime:
    return datetime.now(UTC)


class EdgelabApp(App):
    """edgelab's operator dashboard."""

    TITLE = "edgelab"
    SUB_TITLE = "device lab"
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("M", "matrix", "Matrix"),
    ]

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], datetime] = _utcnow,
        poll_s: float = 2.0,
        run_poll_s: float = 0.5,
        open_run: str | None = None,
    ):
        super().__init__()
        self.engine = engine
        self.clock = clock
        self.poll_s = poll_s
        self.run_poll_s = run_poll_s
        self._open_run = open_run

    def on_mount(self) -> None:
        from edgelab.tui.screens.fleet import FleetScreen

        self.push_screen(FleetScreen())
        if self._open_run:
            self.open_run(self._open_run)

    def open_device(self, name: str) -> None:
        from edgelab.tui.screens.device import DeviceScreen

        self.push_screen(DeviceScreen(name))

    def open_run(self, run_id: str) -> None:
        from edgelab.tui.screens.run import RunScreen

        self.push_screen(RunScreen(run_id))

    def action_matrix(self) -> None:
        from edgelab.tui.screens.matrix import MatrixScreen

        if not isinstance(self.screen, MatrixScreen):
            self.push_screen(MatrixScreen())
