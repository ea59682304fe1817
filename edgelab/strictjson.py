"""JSON read defensively: nesting bounded before ``json.loads`` recurses, no NaN or Infinity.

Shared by the study import (``edgelab.metrics.study``) and the capture check
(``edgelab.probe.capture``); stdlib only, below every layer.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 32  # JSON nesting deeper than this is refused before parsing (no recursion blow-up)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a finite number")


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether brackets nest deeper than ``limit`` (outside strings): refused before json.loads."""
    depth = 0
    in_str = esc = False
    for c in text:
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "[{":
            depth += 1
            if depth > limit:
                return True
        elif c in "]}":
            depth -= 1
    return False


def loads_strict(text: str) -> Any:
    """``json.loads`` that refuses NaN/Infinity and nesting deeper than MAX_DEPTH (ValueError)."""
    if too_deep(text):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return json.loads(text, parse_constant=_no_constant)
