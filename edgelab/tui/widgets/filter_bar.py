"""The fleet filter: an input shown by '/', hidden (and cleared) by escape."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input


class FilterBar(Input):
    BINDINGS = [Binding("escape", "close", "Clear filter", show=False)]

    def __init__(self, **kwargs):
        super().__init__(
            placeholder="filter: words match name, class, transport, state, address, tags, 'virtual'",
            id="filter",
            **kwargs,
        )

    def open(self) -> None:
        self.add_class("visible")
        self.focus()

    def action_close(self) -> None:
        self.value = ""
        self.remove_class("visible")
        self.screen.focus_next()
