"""Plots of comparisons and trends, drawn by plotting libraries rather than by hand.

Files (a CI artifact: ``runs compare ... --plot out.png|.svg|.html``) are drawn with matplotlib
(the ``plots`` extra; headless Agg backend); a trend in the terminal or the TUI (a metric's last N
runs with the baseline's line) is drawn with plotext as text. Virtual runs say so in the title.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from edgelab.errors import ConfigError

FORMATS = (".png", ".svg", ".html")


def plot_comparison(comp: Any, path: Path | str) -> Path:
    """Both sides' raw values per metric, side by side (box + points), with the ratio, interval and
    verdict in each panel's title; ``comp`` is an edgelab.metrics.runsets.Comparison."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ConfigError(
            f"cannot draw {path.name}: unknown format", remedy=f"use one of {', '.join(FORMATS)}"
        )
    plt = _pyplot()
    results = [
        r for r in comp.results if comp.a.values.get(r.metric.name) and comp.b.values.get(r.metric.name)
    ]
    if not results:
        raise ConfigError(
            "nothing to draw: no metric has values on both sides", remedy="compare runs that measured"
        )
    cols = min(3, len(results))
    rows = (len(results) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(max(6.5, 4.2 * cols), 1.0 + 3.4 * rows), squeeze=False)
    for ax in axes.flat[len(results) :]:
        ax.set_visible(False)
    for ax, r in zip(axes.flat, results, strict=False):
        name = r.metric.name
        data = [comp.a.values[name], comp.b.values[name]]
        ax.boxplot(data, showfliers=False)
        ax.set_xticks([1, 2], ["A", "B"])
        for i, vals in enumerate(data, start=1):
            jitter = [i + 0.12 * ((k * 0.6180339) % 1.0 - 0.5) for k in range(len(vals))]
            ax.scatter(jitter, vals, s=8, alpha=0.6)
        iv = f" [{r.low:.3f}, {r.high:.3f}]" if r.low is not None else ""
        ratio = f"B/A {r.ratio:.3f}{iv}" if r.ratio is not None else "no ratio"
        ax.set_title(f"{r.metric.label}\n{ratio}: {r.verdict}", fontsize=9)
        if r.metric.unit:
            ax.set_ylabel(r.metric.unit)
    virtual = (
        " (VIRTUAL device)"
        if comp.a.key().get("virtual") is True or comp.b.key().get("virtual") is True
        else ""
    )
    fig.suptitle(
        f"A: {comp.a.label}\nB: {comp.b.label}{virtual}\n{comp.confidence:.0%} bootstrap interval of the ratio of medians",
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".html":
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
        title = f"edgelab compare: {comp.a.label} vs {comp.b.label}"
        path.write_text(
            f"<!doctype html><html><head><meta charset='utf-8'><title>{_html(title)}</title></head>"
            f"<body><h1>{_html(title)}</h1>{buf.getvalue()}</body></html>\n",
            encoding="utf-8",
        )
    else:
        fig.savefig(path)
    plt.close(fig)
    return path


def _html(text: str) -> str:
    import html

    return html.escape(text)


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as err:
        raise ConfigError(
            "drawing a plot file needs matplotlib", remedy="pip install 'edgelab[plots]'"
        ) from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def trend_text(
    points: list[dict[str, Any]],
    *,
    baseline: float | None = None,
    title: str = "",
    width: int = 60,
    height: int = 12,
    unit: str | None = None,
    baseline_label: str = "baseline",
) -> str:
    """A metric's medians over runs (oldest left) as a plotext chart, the baseline as a line.

    Plain text (no colour codes), so a widget or a terminal shows it as it is."""
    import plotext as plx

    plx.clear_figure()
    plx.plotsize(width, height)
    plx.theme("clear")
    ys = [p["median"] for p in points]
    xs = list(range(1, len(ys) + 1))
    if ys:
        plx.plot(xs, ys, marker="dot", label="median")
        if baseline is not None:
            plx.plot(xs, [baseline] * len(xs), marker="-", label=baseline_label)
        plx.xticks(xs if len(xs) <= 12 else xs[:: max(1, len(xs) // 10)])
    plx.title(title if len(title) <= width - 4 else title[: width - 7] + "...")
    if unit:
        plx.ylabel(unit)
    plx.xlabel("run (oldest -> newest)")
    text = plx.uncolorize(plx.build())
    plx.clear_figure()
    return str(text)
