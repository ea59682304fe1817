"""Per-class deploy defaults (DESIGN §2a, from the vLLM-Omni edge study), kept in one table.

Calibration refines these from measurements; until then they size budgets, start-up timeouts
(load time = weights / read bandwidth) and the first TTS chunk.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from edgelab.units import GIB, MIB


@dataclass(frozen=True)
class ClassDefaults:
    max_seqs: int
    headroom_bytes: int
    min_first_chunk_frames: int
    safety_margin_ms: int
    weight_read_gbps: float  # GB/s (10^9 bytes per second) reading weights from storage

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


CLASS_DEFAULTS: dict[str, ClassDefaults] = {
    "cuda_discrete": ClassDefaults(4, 2 * GIB, 2, 50, 2.0),
    "jetson": ClassDefaults(2, 3 * GIB, 2, 80, 0.8),
    "x86_cpu": ClassDefaults(2, 2 * GIB, 2, 120, 1.0),
    "arm64_cpu": ClassDefaults(1, 1 * GIB, 3, 160, 0.4),
    "npu_phone": ClassDefaults(1, 1 * GIB, 4, 200, 0.3),
}

ACTIVATION_FRACTION = 0.15
ACTIVATION_FLOOR = 512 * MIB
