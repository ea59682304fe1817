"""The remote log of a run, following: appends new lines, keeps the last few thousand."""

from __future__ import annotations

from textual.widgets import Log

from edgelab.safetext import printable


class LogTail(Log):
    def __init__(self, **kwargs):
        super().__init__(max_lines=5000, auto_scroll=True, **kwargs)
        self.border_title = "remote log (following)"

    def follow(self, lines: list[str]) -> None:
        """A device's lines: its colour dropped, any other control sequence shown escaped."""
        if lines:
            self.write_lines([printable(line, multiline=True) for line in lines])
