"""A metric's last N runs for one device and pipeline, with the baseline's line: what the device
page and a matrix cell draw (edgelab.views.plots.trend_text renders it with plotext).

The metric is the pipeline's headline that the runs measured (TTFA for speech, decode tokens/s for
text, action latency for VLA); each point is one finished run's median of its raw per-request
values. The baseline is the current one of that device and pipeline (``nightly`` first when there
are several), its pooled median drawn as a horizontal line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from edgelab.errors import EdgelabError
from edgelab.metrics import compare as cmp
from edgelab.metrics.runsets import pooled_values, resolve, trend
from edgelab.states import RunState
from edgelab.store.baselines import current_baselines
from edgelab.store.db import session_scope
from edgelab.store.runs import list_runs

HEADLINES = ("ttfa", "decode_tok_s", "action_latency", "ttft", "rtf_streamed")


@dataclass(frozen=True)
class TrendView:
    device: str
    pipeline: str
    metric: str
    points: list[dict[str, Any]]  # oldest first: run, at, median, p95, count
    baseline: float | None
    baseline_name: str | None
    virtual: bool

    def title(self) -> str:
        virt = " (VIRTUAL)" if self.virtual else ""
        return f"{cmp.metric(self.metric).label} median, {self.pipeline}, last {len(self.points)}{virt}"

    def text(self, width: int = 60, height: int = 12) -> str:
        from edgelab.views.plots import trend_text

        return trend_text(
            self.points,
            baseline=self.baseline,
            title=self.title(),
            width=width,
            height=height,
            unit=cmp.metric(self.metric).unit,
            baseline_label=f"baseline {self.baseline_name}",
        )


def load_trend(
    engine: Engine, device: str, pipeline: str | None = None, metric: str | None = None, *, last: int = 20
) -> TrendView | None:
    """The trend of ``device`` (its newest run's pipeline unless given); None when nothing to draw."""
    with session_scope(engine, write=False) as s:
        runs = list_runs(s, device=device, pipeline=pipeline, state=RunState.FINISHED, limit=1)
        if not runs:
            return None
        newest = runs[0]
        pipe = pipeline or newest.pipeline
        if pipe is None:
            return None
        names = [metric] if metric else list(HEADLINES)
        for name in names:
            points = trend(s, device, pipe, name, last=last)
            if points:
                break
        else:
            return None
        base_value = base_name = None
        bases = [b for b in current_baselines(s) if b.device == device and b.pipeline == pipe]
        bases.sort(key=lambda b: (b.name != "nightly", b.name))
        if bases:
            try:
                side = resolve(s, f"baseline:{bases[0].name}", device=device, pipeline=pipe)
                vals = pooled_values(s, side.runs).get(name)
                base_value = cmp.side(vals).median if vals else None
                base_name = bases[0].name
            except EdgelabError:  # a baseline naming a deleted run must not hide the trend
                base_value = base_name = None
        return TrendView(device, pipe, name, points, base_value, base_name, bool(newest.virtual))
