"""One headline figure: a label, the value with its unit, and a dim line under it (p95, count, source)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class MetricTile(Static):
    def __init__(self, label: str, **kwargs):
        super().__init__("", **kwargs)
        self.label = label
        self.border_title = label
        self.set_value(None)

    def set_value(self, value: str | None, sub: str = "", *, alert: bool = False) -> None:
        """``value`` None means unknown (shown as such, never as zero)."""
        text = Text(
            "unknown" if value is None else value,
            style="dim" if value is None else ("bold red" if alert else "bold"),
        )
        if sub:
            text.append("\n" + sub, style="dim")
        self.update(text)
