"""S3 light orchestration: a small controller over llama.cpp / MNN / ExecuTorch on the device.

The process is the runtime's S3 template: for a text LM on llama.cpp that is llama-server, the
worker a lab-side client measures through a forwarded port; for the reference runtime it is the
reference workload, which keeps the stage graph, the chunk schedule and the cancel rules and emits
edgelab events. A team's own controller is a runtime with an S3 template of its own.
"""

from __future__ import annotations

from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.strategies.common import PlanContext, one_process_plan, runtime_and_backend
from edgelab.deploy.strategies.controller import CONTROLLER_STAGES, has_controller


def process_name(ctx: PlanContext) -> str:
    return "server" if ctx.spec.kind == "text_lm" else "controller"


def build(ctx: PlanContext, reason: str) -> ExecutionPlan:
    runtime, _backend = runtime_and_backend(ctx)
    stage = CONTROLLER_STAGES[ctx.spec.kind][0] if has_controller(runtime, ctx.spec.kind) else None
    plan = one_process_plan(ctx, "S3", reason, process_name(ctx), stage=stage)
    serves = plan.processes[0].serves
    plan.endpoints = [serves] if serves else []
    return plan
