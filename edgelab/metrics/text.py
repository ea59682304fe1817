"""Text-generation metrics: time to first token, inter-token interval, decode tokens/s."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from edgelab.metrics.stats import summarize


def text_metrics(tokens: Iterable[tuple[float, int]], submitted: float) -> dict[str, Any]:
    """``tokens``: (arrival time s, tokens in that event). Decode rate counts the tokens after
    the first event over the time from the first to the last event (prefill excluded)."""
    toks = sorted(tokens)
    if not toks:
        return {"tokens": 0, "ttft_ms": None, "itl_ms": summarize([]), "decode_tok_s": None}
    total = sum(n for _, n in toks)
    gaps = [(b[0] - a[0]) * 1000.0 for a, b in zip(toks, toks[1:], strict=False)]
    span = toks[-1][0] - toks[0][0]
    after_first = total - toks[0][1]
    return {
        "tokens": total,
        "ttft_ms": (toks[0][0] - submitted) * 1000.0,
        "itl_ms": summarize(gaps),
        "decode_tok_s": after_first / span if span > 0 and after_first > 0 else None,
    }
