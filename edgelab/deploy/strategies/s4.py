"""S4 hybrid: the device runs one stage (e.g. code2wav) and the rest runs on a vLLM-Omni server.

The talker streams codec tokens over WebSocket (``output_mode: codec_tokens``); for VLA pipelines
the server is only a re-planning tier, never in the control loop.
"""

from __future__ import annotations

from edgelab.deploy.plan import ExecutionPlan, ProcessSpec
from edgelab.deploy.strategies.common import (
    REFERENCE,
    PlanContext,
    base_plan,
    reference_process,
    runtime_and_backend,
    stage_plans,
)
from edgelab.deploy.strategies.s3 import controller_argv


def build(ctx: PlanContext, reason: str) -> ExecutionPlan:
    only = list(ctx.spec.device_stages_s4)
    runtime, backend = runtime_and_backend(ctx)
    if runtime == REFERENCE:
        proc = reference_process(ctx, "device-stage")
        proc.argv += ["--server", ctx.endpoint or ""]
    else:
        proc = ProcessSpec("device-stage", controller_argv(ctx, runtime, backend, only, ctx.endpoint),
                           ready_pattern=r"ready")
    stages = stage_plans(ctx, runtime, backend, process="device-stage", only=only)
    plan = base_plan(ctx, "S4", runtime, reason, stages, [proc], memory_stages=only,
                     endpoints=[ctx.endpoint] if ctx.endpoint else [])
    if ctx.spec.kind == "vla":
        plan.notes.append("the server is a re-planning tier only, never in the control loop")
    return plan
