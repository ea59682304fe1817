"""S5 edge-native baseline: the runtime's own pipeline binary, the measurement floor.

The command is the runtime's S5 template (``llama-completion`` for a text LM, ``llama-tts``,
MNN's demos, an ExecutorTorch runner, ``benchncnn``); whatever else runs is reported beside it.
"""

from __future__ import annotations

from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.strategies.common import PlanContext, one_process_plan


def build(ctx: PlanContext, reason: str) -> ExecutionPlan:
    return one_process_plan(ctx, "S5", reason, "native")
