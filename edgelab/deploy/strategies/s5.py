"""S5 edge-native baseline: the runtime's own pipeline binary, the measurement floor.

The command is the runtime's S5 template (``llama-completion`` for a text LM, ``llama-tts``,
MNN's demos, an ExecutorTorch runner, ``benchncnn``); whatever else runs is reported beside it.
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
    runtime, backend = runtime_and_backend(ctx)
    proc, needs = template_process(ctx, "native", runtime, "S5", backend, strategy_values(ctx, "S5"))
    stages = stage_plans(ctx, runtime, backend, process="native")
    return base_plan(ctx, "S5", runtime, reason, stages, [proc], needs=needs)
