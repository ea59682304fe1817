"""Memory pools and the study's budget rule (DESIGN §2a, §5b).

pool - weights - activations (max(15 % of weights, 512 MiB)) - headroom = KV/state budget;
KV bytes per token = 2 x layers x kv_heads x head_dim x dtype bytes; max tokens = budget // that.
Pools are kept apart (RAM, WSL quota, host RAM, Windows commit, each GPU's VRAM); unified memory
is one pool, never counted twice for CPU and GPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from edgelab.profile.defaults import ACTIVATION_FLOOR, ACTIVATION_FRACTION, GIB

WMI_SATURATED = 4 * GIB - 1024**2  # Win32_VideoController.AdapterRAM is 32-bit: >= this means "4 GiB or more"


@dataclass
class Pool:
    name: str  # ram | wsl_quota | host_ram | commit | vram:<gpu>
    kind: str
    total_bytes: int
    source: str  # which fact (or catalog entry) gave the number

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Budget:
    pool: str
    pool_bytes: int
    quantization: str
    weights_bytes: int
    activation_bytes: int
    headroom_bytes: int
    kv_budget_bytes: int  # may be negative: the weights do not fit
    kv_bytes_per_token: int
    max_tokens: int | None  # over all sequences; None for a stage graph without a KV cache
    max_tokens_per_seq: int | None
    max_seqs: int
    fits: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def activation_bytes(weights: int) -> int:
    return max(int(ACTIVATION_FRACTION * weights), ACTIVATION_FLOOR)


def compute_budget(
    pool: Pool,
    quantization: str,
    weights: int,
    headroom: int,
    kv_per_token: int,
    max_seqs: int,
    min_tokens_per_seq: int,
) -> Budget:
    """The budget rule, and whether ``min_tokens_per_seq`` of KV fits for every one of ``max_seqs``."""
    act = activation_bytes(weights)
    kv_budget = pool.total_bytes - weights - act - headroom
    if kv_per_token > 0:
        max_tokens = max(kv_budget, 0) // kv_per_token
        per_seq = max_tokens // max(max_seqs, 1)
        fits = kv_budget > 0 and per_seq >= min_tokens_per_seq
    else:
        max_tokens = per_seq = None
        fits = kv_budget > 0
    return Budget(
        pool.name,
        pool.total_bytes,
        quantization,
        weights,
        act,
        headroom,
        kv_budget,
        kv_per_token,
        max_tokens,
        per_seq,
        max_seqs,
        fits,
    )
