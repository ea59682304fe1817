"""S1 direct port: vLLM-Omni itself on a Jetson-class device (``vllm serve MODEL --omni``).

The edge deploy profile caps sequences and context at what the budget holds; the study measured
95-355 s cold starts, so readiness waits on the server's own "startup complete" line.
"""

from __future__ import annotations

from edgelab.deploy.plan import ExecutionPlan, ProcessSpec
from edgelab.deploy.strategies.common import REFERENCE, PlanContext, base_plan, reference_process, stage_plans

PORT = 8091


def model_id(ctx: PlanContext) -> str:
    """The Hugging Face id from the spec's first source (``https://huggingface.co/ORG/NAME``)."""
    for src in ctx.spec.sources:
        if "huggingface.co/" in src:
            return src.split("huggingface.co/", 1)[1].strip("/")
    return ctx.spec.id


def build(ctx: PlanContext, reason: str) -> ExecutionPlan:
    runtime = REFERENCE if (ctx.runtime == REFERENCE or (ctx.virtual and not ctx.runtime)) else "vllm-omni"
    fit = ctx.pipeline_profile.fit
    if runtime == REFERENCE:
        proc = reference_process(ctx, "server", schedule="server")
        backend = "cpu"
    else:
        b = fit.budget
        max_len = max(ctx.spec.min_context_tokens, (b.max_tokens_per_seq or 0) if b else 0)
        argv = ["vllm", "serve", model_id(ctx), "--omni", "--host", "127.0.0.1", "--port", str(PORT),
                "--dtype", "bfloat16" if ctx.profile.dtype == "bf16" else "float16",
                "--max-num-seqs", str(ctx.profile.defaults.max_seqs), "--max-model-len", str(min(max_len, 32768)),
                "--gpu-memory-utilization", "0.80", "--enforce-eager"]
        proc = ProcessSpec("server", argv, ready_pattern=r"Application startup complete")
        backend = "cuda"
    stages = stage_plans(ctx, runtime, backend, process="server")
    endpoints = [f"ws://127.0.0.1:{PORT}/v1/audio/speech/stream"] if ctx.spec.kind == "tts" else \
        [f"http://127.0.0.1:{PORT}/v1"]
    plan = base_plan(ctx, "S1", runtime, reason, stages, [proc], endpoints=endpoints)
    sched = fit.chunk_schedule or {}
    if sched.get("server"):
        plan.notes.append(f"server chunk schedule {sched['server']}; edge ramp {sched.get('ramp_frames')}")
    return plan
