"""Bench of edgelab's S3 controller on a real runtime: the exported model, its parity, the command.

Before the workload starts, the stage is exported (or taken from the model cache), registered
as an artifact, and checked for parity: MNN and ONNX Runtime each integrate the head from the
same fixed noise and are compared with ONNX's own numpy evaluation of the graph. The report is
stored with the run. On a virtual device the controller runs on the lab host and reads the
model from the lab's cache; a real device needs the artifact pushed, which this path refuses.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from edgelab.deploy.refusal import Refusal
from edgelab.deploy.strategies.controller import CONTROLLER_RUNTIMES, CONTROLLER_STAGES, MODEL
from edgelab.models.export import Exported
from edgelab.store.db import session_scope


def _opt(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def prepare(engine: Engine, base: list[str], *, virtual: bool, device: str,
            strategy: str | None) -> tuple[Exported, dict[str, Any]]:
    """The model the controller will load (exported, registered) and the parity report."""
    from edgelab.models.export import export, register
    from edgelab.models.parity import run_isolated

    runtime = _opt(base, "--runtime") or ""
    kind = base[base.index("edgelab.controller") + 1]
    if not virtual:
        raise Refusal("no_exported_graph", f"the S3 controller on {runtime} reads its model from the lab's cache, "
                      "which only a virtual device (a process on the lab host) can see", device=device,
                      strategy=strategy, remedy="push the exported stage with a launch template "
                      "(runtimes/*.yaml launch:), or bench on a virtual device")
    stage = CONTROLLER_STAGES[kind][1]
    ex = export(stage, CONTROLLER_RUNTIMES[runtime])
    with session_scope(engine) as s:
        register(s, ex)
    return ex, run_isolated(stage)


def controller_argv(base: list[str], req, run_id: str, model: Exported) -> list[str]:
    """The plan's controller command with the protocol's tick counts and this run's model."""
    argv = [model.path.as_posix() if a == MODEL else a for a in base]
    out: list[str] = []
    skip = {"--steps", "--run", "--device"}
    i = 0
    while i < len(argv):
        if argv[i] in skip:
            i += 2
            continue
        out.append(argv[i])
        i += 1
    out += ["--control-hz", f"{req.control_hz:g}", "--steps", str(req.requests), "--warmup", str(req.warmup)]
    if req.hog:
        out += ["--hog", str(req.hog)]
    return out + ["--run", run_id, "--device", req.device]
