"""A plan's memory request from the model it really binds, not the catalog's checkpoint.

The profile sizes a pipeline from the catalog (parameters x the format that fits, KV from the
catalog's layer shape). Once planning has bound a model file to the template (a 67 MB Q4_K_M GGUF
made by ``edgelab model synth``, an exported ONNX stage), that file is what the process loads:
weights are its bytes, activations the study's rule on them (max(15 %, 512 MiB)), and the KV cache
comes from the file's own shape when its recipe records one (layers, KV heads, head size; a 16-bit
cache), else the catalog's. The detail says which source each number came from.
"""

from __future__ import annotations

from edgelab.deploy.artifact_need import ResolvedArtifact
from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.strategies.common import PlanContext

MIB = 1024**2
KV_DTYPE_BYTES = 2  # llama.cpp's default f16 KV cache
MODEL_KINDS = ("model", "weights", "graph")


def bound_models(plan: ExecutionPlan) -> list[ResolvedArtifact]:
    """The plan's model artifacts that are bound to a file of known size."""
    return [a for a in plan.present_artifacts() if a.kind in MODEL_KINDS and a.bytes]


def resize(plan: ExecutionPlan, ctx: PlanContext) -> None:
    """Rewrite the budget request from the bound models' real sizes (no-op without any, or when the
    request is a vLLM ``--gpu-memory-utilization`` fraction, which is what that server takes)."""
    models = bound_models(plan)
    d = plan.memory_detail
    if not models or len(plan.memory) != 1 or "gpu_memory_utilization" in d or "budget_request" in d:
        return
    pool = next(iter(plan.memory))
    weights = sum(int(a.bytes or 0) for a in models)
    act = max(int(0.15 * weights), 512 * MIB)
    shapes: list[dict[str, int]] = [a.shape for a in models if a.shape]
    tokens = _context_tokens(plan) or ctx.spec.min_context_tokens
    seqs = ctx.profile.defaults.max_seqs
    if len(shapes) == len(models):
        per_token = sum(2 * s["n_layer"] * s["n_head_kv"] * s["head_dim"] * KV_DTYPE_BYTES for s in shapes)
        kv_source = "the bound model's shape (f16 cache)"
    else:
        per_token = int(d.get("kv_bytes_per_token") or 0)
        kv_source = "the catalog's layer shape"
    kv = per_token * tokens * seqs
    plan.memory = {pool: weights + act + kv}
    d.update(
        {
            "weights": weights,
            "weights_source": ", ".join(f"{a.name}: {a.file} ({int(a.bytes or 0)} bytes)" for a in models),
            "catalog_weights": d.get("weights"),
            "activations": act,
            "kv": kv,
            "kv_bytes_per_token": per_token,
            "kv_source": kv_source,
            "tokens": tokens,
            "max_seqs": seqs,
        }
    )
    plan.notes.append(
        f"memory sized from the bound model ({weights / MIB:.1f} MiB of weights), not the catalog's "
        f"{(d.get('catalog_weights') or 0) / MIB:.0f} MiB"
    )


def _context_tokens(plan: ExecutionPlan) -> int | None:
    """The context the process is told to hold (``-c``/``ctx`` of its template), when it says."""
    for proc in plan.processes:
        raw = (proc.values or {}).get("ctx")
        if raw and str(raw).isdigit():
            return int(raw)
    return None
