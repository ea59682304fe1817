"""S4 hybrid: the device runs one stage (e.g. code2wav) and the rest runs on a vLLM-Omni server.

The talker streams codec tokens over WebSocket (``output_mode: codec_tokens``); the device stage
is the runtime's S4 template, given the server endpoint (``{server}``) and the stages it runs
(``{stages}``). For VLA pipelines the server is only a re-planning tier, never in the control loop.
"""

from __future__ import annotations

from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.strategies.common import PlanContext, one_process_plan


def build(ctx: PlanContext, reason: str) -> ExecutionPlan:
    only = list(ctx.spec.device_stages_s4)
    plan = one_process_plan(
        ctx,
        "S4",
        reason,
        "device-stage",
        {"server": ctx.endpoint, "stages": ",".join(only) or None},
        stage=only[0] if only else None,
        only=only,
        endpoints=[ctx.endpoint] if ctx.endpoint else [],
    )
    if ctx.spec.kind == "vla":
        plan.notes.append("the server is a re-planning tier only, never in the control loop")
    return plan
