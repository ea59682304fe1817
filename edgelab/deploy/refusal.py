"""A refused deployment: a code, the device, the pool and numbers, and what to do about it."""

from __future__ import annotations

from typing import Any

from edgelab.errors import EdgelabError

CODES = ("no_runnable_device", "weight_format_unsupported", "budget_exceeds_device", "no_exported_graph",
         "device_unreachable", "strategy_refused")


class Refusal(EdgelabError):
    """Raised before anything is pushed or launched; stored with the attempt."""

    def __init__(self, code: str, message: str, *, device: str, remedy: str, pool: str | None = None,
                 numbers: dict[str, Any] | None = None, strategy: str | None = None):
        super().__init__(f"{code}: {device}: {message}", remedy=remedy)
        self.code = code
        self.device = device
        self.detail = message
        self.pool = pool
        self.numbers = numbers or {}
        self.strategy = strategy

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "device": self.device, "message": self.detail, "pool": self.pool,
                "numbers": self.numbers, "strategy": self.strategy, "remedy": self.remedy}
