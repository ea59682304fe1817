"""S1 direct port: vLLM-Omni itself on a Jetson-class device (``vllm serve MODEL --omni``).

The command is vllm-omni's S1 template (runtimes/vllm-omni.yaml, what vLLM-Omni documents for the
pipeline); the edge deploy profile caps sequences and context at what the budget holds, and the
memory the plan reserves is exactly the ``--gpu-memory-utilization`` fraction it gives vLLM. The
study measured 95-355 s cold starts: the start-up timeout comes from the profile's load estimate
(``--ready-timeout`` overrides it).
"""

from __future__ import annotations

import math

from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.strategies.common import REFERENCE, PlanContext, base_plan, stage_plans, template_process


def model_id(ctx: PlanContext) -> str:
    """The Hugging Face id from the spec's first source (``https://huggingface.co/ORG/NAME``)."""
    for src in ctx.spec.sources:
        if "huggingface.co/" in src:
            return src.split("huggingface.co/", 1)[1].strip("/")
    return ctx.spec.id


def gpu_fraction(ctx: PlanContext, plan: ExecutionPlan) -> float | None:
    """The pool fraction the plan reserves, rounded up to 0.01 (what vLLM is told to take)."""
    pool = ctx.profile.budget_pool
    if pool is None or not plan.memory or not pool.total_bytes:
        return None
    want = sum(plan.memory.values())
    return min(0.95, math.ceil(want / pool.total_bytes * 100) / 100)


def build(ctx: PlanContext, reason: str) -> ExecutionPlan:
    runtime = REFERENCE if (ctx.runtime == REFERENCE or (ctx.virtual and not ctx.runtime)) else "vllm-omni"
    fit = ctx.pipeline_profile.fit
    backend = "cpu" if runtime == REFERENCE else "cuda"
    if runtime == REFERENCE:
        values: dict = {"schedule": "server"}
    else:
        b = fit.budget
        max_len = max(ctx.spec.min_context_tokens, (b.max_tokens_per_seq or 0) if b else 0)
        values = {
            "model_id": model_id(ctx),
            "max_seqs": ctx.profile.defaults.max_seqs,
            "max_model_len": min(max_len, 32768),
            "dtype": "bfloat16" if ctx.profile.dtype == "bf16" else "float16",
            "gpu_mem_util": "0.90",
        }
    proc, needs = template_process(ctx, "server", runtime, "S1", backend, values)
    plan = base_plan(
        ctx, "S1", runtime, reason, stage_plans(ctx, runtime, backend, process="server"), [proc], needs=needs
    )
    if runtime != REFERENCE:
        frac = gpu_fraction(ctx, plan)
        pool = ctx.profile.budget_pool
        if frac is not None and pool is not None and proc.unavailable is None:  # a fraction comes from a pool
            proc, needs = template_process(
                ctx, "server", runtime, "S1", backend, {**values, "gpu_mem_util": f"{frac:.2f}"}
            )
            plan.processes = [proc]
            plan.memory = {pool.name: int(frac * pool.total_bytes)}
            plan.memory_detail["gpu_memory_utilization"] = frac
            plan.notes.append(
                f"vLLM is told --gpu-memory-utilization {frac:.2f}: the {plan.memory[pool.name]} "
                f"bytes this plan reserves in {pool.name}"
            )
    plan.endpoints = [proc.serves] if proc.serves else []
    sched = fit.chunk_schedule or {}
    if sched.get("server"):
        plan.notes.append(f"server chunk schedule {sched['server']}; edge ramp {sched.get('ramp_frames')}")
    return plan
