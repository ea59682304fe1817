"""A labelled sparkline with its latest value, min and max: one series of device telemetry or a run metric."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline, Static

from edgelab.units import series_caption


class Telemetry(Vertical):
    def __init__(self, label: str, values: list[float] | None = None, *, unit: str = "", **kwargs):
        super().__init__(**kwargs)
        self.label = label
        self.unit = unit
        self.values = list(values or [])

    def compose(self) -> ComposeResult:
        yield Static(self._caption(), classes="caption")
        yield Sparkline(self.values or [0.0])

    def _caption(self) -> str:
        return series_caption(self.label, self.values, self.unit)

    def set_values(self, values: list[float]) -> None:
        self.values = list(values)
        if not self.is_mounted:
            return
        self.query_one(Static).update(self._caption())
        self.query_one(Sparkline).data = self.values or [0.0]
