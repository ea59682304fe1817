"""One line at the bottom of a screen: counts, the sort, and the last action's outcome."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class StatusLine(Static):
    def say(self, text: str, *, error: bool = False) -> None:
        self.update(Text(text, style="red" if error else ""))
