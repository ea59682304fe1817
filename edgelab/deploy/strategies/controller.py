"""The S3 controller process (``python -m edgelab.controller``) for a stage on MNN or ONNX Runtime.

Where a runtime has a controller adapter (edgelab/controller/rt_*.py), S3 launches edgelab's
controller over that runtime instead of the generic ``edgelab-s3`` binary. The model path is a
``{model}`` placeholder: the bench/deploy layer fills it with the exported stage's path (on a
virtual device, the lab's model cache, since the process runs on the lab host).
"""

from __future__ import annotations

from edgelab.deploy.plan import ProcessSpec
from edgelab.deploy.strategies.common import PlanContext

CONTROLLER_RUNTIMES = {"mnn": "mnn", "onnxruntime": "onnx"}  # runtime -> exported model format
CONTROLLER_STAGES = {"vla": ("action_head", "action-head")}  # pipeline kind -> (spec stage, export stage)
MODEL = "{model}"


def has_controller(runtime: str, kind: str) -> bool:
    return runtime in CONTROLLER_RUNTIMES and kind in CONTROLLER_STAGES


def controller_process(ctx: PlanContext, runtime: str, backend: str) -> ProcessSpec:
    """A serving controller (tick count no session reaches); bench replaces the count with its own."""
    kind = ctx.spec.kind
    # A virtual device is a process on the lab host: one thread, whatever cores its persona claims.
    threads = 1 if ctx.virtual else (ctx.profile.threads or 1)
    argv = [ctx.python, "-m", "edgelab.controller", kind, "--runtime", runtime, "--backend", backend,
            "--model", MODEL, "--threads", str(threads), "--steps", "100000000",
            "--run", ctx.run_id, "--device", ctx.device]
    return ProcessSpec(name="controller", argv=argv, ready_pattern=r'"kind":\s*"run\.start"')
