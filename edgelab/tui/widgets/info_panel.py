"""A titled panel of rows (facts, profile, artifacts, runs) rendered as one Rich table."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from edgelab.safetext import printable


class InfoPanel(Static):
    def __init__(self, title: str, **kwargs):
        super().__init__("", classes="panel", **kwargs)
        self.border_title = title

    def show_pairs(self, pairs: Iterable[tuple[str, str]], note: str | None = None) -> None:
        table = Table(show_header=False, box=None, pad_edge=False, expand=True)
        table.add_column("key", style="bold", no_wrap=True)
        table.add_column("value", overflow="fold")
        for k, v in pairs:  # a value from the database or a device: plain text, controls escaped
            table.add_row(k, v if isinstance(v, Text) else Text(printable(v, multiline=True)))
        self.update(Group(table, Text(printable(note, multiline=True), style="dim")) if note else table)

    def show_table(self, columns: list[str], rows: list[list], note: str | None = None) -> None:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=True)
        for c in columns:
            table.add_column(c, overflow="fold")
        for r in rows:
            table.add_row(*[x if isinstance(x, Text) else Text(printable(x)) for x in r])
        self.update(Group(table, Text(printable(note, multiline=True), style="dim")) if note else table)

    def show_note(self, note: str) -> None:
        self.update(Text(printable(note, multiline=True), style="dim"))
