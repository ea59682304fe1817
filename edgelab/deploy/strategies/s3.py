"""S3 light orchestration: a small controller over llama.cpp / MNN / ExecuTorch on the device.

The controller keeps the pipeline's stage graph, the profile's chunk schedule and the cancel rules;
each stage runs on the runtime and backend the device profile chose.
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
from edgelab.deploy.strategies.controller import controller_process, has_controller


def controller_argv(ctx: PlanContext, runtime: str, backend: str, only: list[str] | None = None,
                    endpoint: str | None = None) -> list[str]:
    argv = ["./edgelab-s3", "--pipeline", ctx.spec.id, "--runtime", runtime, "--backend", backend,
            "--run", ctx.run_id]
    if ctx.profile.threads:
        argv += ["--threads", str(ctx.profile.threads)]
    sched = ctx.pipeline_profile.fit.chunk_schedule or {}
    if sched.get("ramp_frames"):
        argv += ["--chunk-ramp", ",".join(str(f) for f in sched["ramp_frames"])]
    if only:
        argv += ["--stages", ",".join(only)]
    if endpoint:
        argv += ["--server", endpoint]
    return argv


def build(ctx: PlanContext, reason: str) -> ExecutionPlan:
    runtime, backend = runtime_and_backend(ctx)
    if runtime == REFERENCE:
        proc = reference_process(ctx, "controller")
    elif has_controller(runtime, ctx.spec.kind):  # edgelab's controller over MNN / ONNX Runtime
        proc = controller_process(ctx, runtime, backend)
    else:
        proc = ProcessSpec("controller", controller_argv(ctx, runtime, backend), ready_pattern=r"ready")
    stages = stage_plans(ctx, runtime, backend, process="controller")
    plan = base_plan(ctx, "S3", runtime, reason, stages, [proc])
    if runtime != REFERENCE:
        plan.artifacts.append({"role": "s3.controller", "stage": None})
    return plan
