"""S5 edge-native baseline: the runtime's own pipeline binary, the measurement floor.

``llama-tts`` / MNN ``qwen3_tts_demo`` for TTS, ``llama-cli`` for text LMs, ``llama-mtmd-cli`` for
omni models, an ExecuTorch runner for VLA; whatever else runs is reported beside it.
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

NATIVE = {  # (runtime, pipeline kind) -> binary
    ("llama.cpp", "tts"): "llama-tts", ("mnn", "tts"): "qwen3_tts_demo", ("executorch", "tts"): "tts_runner",
    ("llama.cpp", "text_lm"): "llama-cli", ("mnn", "text_lm"): "llm_demo", ("executorch", "text_lm"): "llama_main",
    ("llama.cpp", "omni"): "llama-mtmd-cli", ("mnn", "omni"): "omni_demo", ("executorch", "omni"): "omni_runner",
    ("executorch", "vla"): "vla_runner", ("llama.cpp", "vla"): "vla_runner", ("mnn", "vla"): "vla_runner",
}


def build(ctx: PlanContext, reason: str) -> ExecutionPlan:
    runtime, backend = runtime_and_backend(ctx)
    if runtime == REFERENCE:
        proc = reference_process(ctx, "native")
    else:
        binary = NATIVE.get((runtime, ctx.spec.kind), f"{runtime}-runner")
        argv = [f"./{binary}", "--model", f"{ctx.spec.id}.{ctx.pipeline_profile.quantization or 'q4'}"]
        if ctx.profile.threads:
            argv += ["-t", str(ctx.profile.threads)]
        proc = ProcessSpec("native", argv, ready_pattern=None)
    stages = stage_plans(ctx, runtime, backend, process="native")
    plan = base_plan(ctx, "S5", runtime, reason, stages, [proc])
    if runtime != REFERENCE:
        plan.artifacts.append({"role": f"s5.{runtime}.binary", "stage": None})
    return plan
