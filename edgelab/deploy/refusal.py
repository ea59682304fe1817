"""A refused deployment: a code, the device, the pool and numbers, and what to do about it.

The class itself lives in :mod:`edgelab.errors` with every other error; this module names the codes.
"""

from __future__ import annotations

from edgelab.errors import Refusal  # noqa: F401  (old location: deploy/lifecycle.py imports it until its split)

CODES = ("no_runnable_device", "weight_format_unsupported", "budget_exceeds_device", "no_exported_graph",
         "device_unreachable", "strategy_refused")
