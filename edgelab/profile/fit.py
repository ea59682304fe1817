"""How one pipeline fits one device: quantization, budget, load time and the TTS chunk schedule.

Quantizations are tried from the most faithful down (16-bit, q8_0, q4); the first whose KV budget
holds ``min_context_tokens`` for every one of the class's ``max_seqs`` wins. Nothing smaller is
substituted silently: when even q4 does not fit, the fit says so and names the pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgelab.catalog.pipelines import PipelineSpec
from edgelab.profile.budget import Budget, Pool, compute_budget
from edgelab.profile.defaults import GIB, ClassDefaults
from edgelab.profile.device import Rules


@dataclass
class Fit:
    quantization: str | None
    budget: Budget | None  # of the chosen quantization, or of the smallest tried when none fits
    tried: list[Budget] = field(default_factory=list)
    load_time_s: float | None = None
    chunk_schedule: dict[str, Any] | None = None

    @property
    def fits(self) -> bool:
        return self.quantization is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "quantization": self.quantization,
            "fits": self.fits,
            "budget": self.budget.to_dict() if self.budget else None,
            "tried": [b.to_dict() for b in self.tried],
            "load_time_s": self.load_time_s,
            "chunk_schedule": self.chunk_schedule,
        }


def quant_order(dtype: str) -> list[str]:
    return ["bf16" if dtype == "bf16" else "fp16", "q8_0", "q4"]


def fit_pipeline(
    spec: PipelineSpec,
    pool: Pool | None,
    dtype: str,
    defaults: ClassDefaults,
    rules: Rules,
    stages: list[str] | None = None,
    label: str | None = None,
) -> Fit:
    """Budget rule over ``pool`` for the pipeline (or only ``stages`` of it, for S4's device side)."""
    tag = label or spec.id
    if pool is None:
        rules.fire(f"{tag}.budget", {"pool": None}, None, "no memory pool known: budget not computed")
        return Fit(None, None)
    kv = (
        0
        if stages is not None
        and not any(s.model and s.model.kv_cache for s in spec.stages if s.name in stages)
        else (
            sum(
                s.model.kv_bytes_per_token()
                for s in spec.stages
                if s.model and (stages is None or s.name in stages)
            )
        )
    )
    tried: list[Budget] = []
    chosen: Budget | None = None
    for q in quant_order(dtype):
        b = compute_budget(
            pool,
            q,
            spec.weight_bytes(q, stages),
            defaults.headroom_bytes,
            kv,
            defaults.max_seqs,
            spec.min_context_tokens,
        )
        tried.append(b)
        rules.fire(
            f"{tag}.budget[{q}]",
            {
                "pool": f"{pool.name}={pool.total_bytes}",
                "weights": b.weights_bytes,
                "activations": b.activation_bytes,
                "headroom": b.headroom_bytes,
                "kv_bytes_per_token": kv,
                "max_seqs": defaults.max_seqs,
                "min_tokens_per_seq": spec.min_context_tokens,
            },
            {"kv_budget": b.kv_budget_bytes, "max_tokens": b.max_tokens, "fits": b.fits},
            f"{pool.total_bytes / GIB:.2f} GiB - weights {b.weights_bytes / GIB:.2f} - activations "
            f"max(15%, 512 MiB) {b.activation_bytes / GIB:.2f} - headroom {b.headroom_bytes / GIB:.0f} "
            f"= {b.kv_budget_bytes / GIB:.2f} GiB KV budget"
            + (f"; {kv} B/token -> {b.max_tokens} tokens" if kv else ""),
        )
        if b.fits:
            chosen = b
            break
    if chosen:
        rules.fire(
            f"{tag}.quantization",
            {"tried": [b.quantization for b in tried]},
            chosen.quantization,
            "the most faithful weight format whose budget fits"
            + (f" ({spec.min_context_tokens} tokens x {defaults.max_seqs} seq)" if kv else ""),
        )
    else:
        last = tried[-1]
        rules.fire(
            f"{tag}.quantization",
            {"tried": [b.quantization for b in tried]},
            None,
            f"budget_exceeds_device: {last.pool}: even {last.quantization} weights "
            f"{last.weights_bytes / GIB:.2f} GiB + activations + headroom leave "
            f"{last.kv_budget_bytes / GIB:.2f} GiB for KV",
        )
    b = chosen or tried[-1]
    load_s = round(b.weights_bytes / (defaults.weight_read_gbps * 1e9), 1)
    rules.fire(
        f"{tag}.load_time",
        {"weights": b.weights_bytes, "read_gbps": defaults.weight_read_gbps},
        load_s,
        "weights / class read bandwidth; sizes start-up timeouts",
    )
    return Fit(chosen.quantization if chosen else None, b, tried, load_s)


def chunk_schedule(spec: PipelineSpec, defaults: ClassDefaults, rules: Rules) -> dict[str, Any] | None:
    """Edge ramp with the class's minimum first chunk; the server schedule is kept for S1/S4."""
    ramp = spec.edge_ramp
    if not ramp:
        return None
    floor = defaults.min_first_chunk_frames
    out: list[int] = []
    for frames in ramp:
        v = max(frames, floor)
        if not out or v > out[-1]:
            out.append(v)
    frame_ms = 1000.0 / float(spec.audio.get("frame_rate_hz", 12.5))
    sched = {
        "ramp_frames": out,
        "first_chunk_ms": round(out[0] * frame_ms, 1),
        "safety_margin_ms": defaults.safety_margin_ms,
        "server": dict(spec.chunk_schedule.get("server", {})),
    }
    rules.fire(
        f"{spec.id}.chunk_schedule",
        {"edge_ramp": ramp, "min_first_chunk_frames": floor},
        out,
        f"ramp doubles up to the steady chunk; first chunk at least {floor} frames for this class "
        f"({out[0] * frame_ms:.0f} ms of audio), safety margin {defaults.safety_margin_ms} ms",
    )
    return sched
