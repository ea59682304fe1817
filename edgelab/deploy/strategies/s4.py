"""S4 hybrid: the device runs one stage (e.g. code2wav) and the rest runs on a vLLM-Omni server.

The talker streams codec tokens over WebSocket (``output_mode: codec_tokens``); the device stage
is the runtime's S4 template, given the server endpoint (``{server}``) and the stages it runs
(``{stages}``). For VLA pipelines the server is only a re-planning tier, never in the control loop.
"""

from __future__ import annotations

from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.strategies.common import (
    PlanContext,
    base_plan,
    runtime_and_backend,
    stage_plans,
    strategy_values,
    template_process,
)


def build(ctx: PlanContext, reason: str) -> ExecutionPlan:
    only = list(ctx.spec.device_stages_s4)
    runtime, backend = runtime_and_backend(ctx)
    values = {**strategy_values(ctx, "S4"), "server": ctx.endpoint, "stages": ",".join(only) or None}
    proc, needs = template_process(
        ctx, "device-stage", runtime, "S4", backend, values, stage=only[0] if only else None
    )
    stages = stage_plans(ctx, runtime, backend, process="device-stage", only=only)
    plan = base_plan(
        ctx,
        "S4",
        runtime,
        reason,
        stages,
        [proc],
        memory_stages=only,
        needs=needs,
        endpoints=[ctx.endpoint] if ctx.endpoint else [],
    )
    if ctx.spec.kind == "vla":
        plan.notes.append("the server is a re-planning tier only, never in the control loop")
    return plan
