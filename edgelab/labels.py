"""How a run's strategy and a stage's placement are named wherever they are shown: never a
strategy's name alone for a run whose real runtime did not run, never "fallback" unless it is one.

S1 is vLLM-Omni itself and S3/S5 are a controller or the runtime's own binary; edgelab's reference
runtime under any of them imitates that strategy's schedule on random weights, so its runs read
``S1 (reference imitation)``. The CLI, the TUI, stored results and the matrix all use this one
function; the stored ``strategy`` field keeps the bare id for filtering.
"""

from __future__ import annotations

REFERENCE = "reference"


def strategy_label(strategy: str | None, runtime: str | None) -> str:
    """``S3``, or ``S3 (reference imitation)`` when the reference runtime stood in for it."""
    if not strategy:
        return "-"
    if runtime == REFERENCE:
        return f"{strategy} (reference imitation)"
    return strategy


def placement_line(pl: dict) -> str:
    """One stage's placement record (edgelab.deploy.placement) in words:
    ``action_head: planned cpu, ran on cpu`` and ``... FALLBACK`` only when it fell back."""
    observed = pl.get("observed")
    if isinstance(observed, dict):  # an older record that kept the runtime's report whole
        observed = observed.get("observed") or "unobserved"
    text = f"{pl.get('stage')}: planned {pl.get('planned')}, "
    text += "not observed" if observed in (None, "unobserved") else f"ran on {observed}"
    return text + (" FALLBACK" if pl.get("fallback") is True else "")
