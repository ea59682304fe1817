"""Bench of edgelab's S3 controller on a real runtime: the exported model and its parity, before planning.

The stage is exported (or taken from the model cache) and registered as a ``model`` artifact, so
the runtime's launch template binds ``{model}`` to it and the push puts it in the device's store
like any other artifact. Parity is checked on the lab host: MNN and ONNX Runtime each integrate
the head from the same fixed noise and are compared with ONNX's own numpy evaluation of the
graph; the report is stored with the run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy import Engine

from edgelab.deploy.strategies.controller import CONTROLLER_RUNTIMES, CONTROLLER_STAGES
from edgelab.models.export import Exported
from edgelab.store.db import session_scope


def prepare(engine: Engine, runtime: str, kind: str, pipeline: str) -> tuple[Exported, dict[str, Any]]:
    """The model the controller's template will bind (exported, registered) and the parity report."""
    from edgelab.models.export import export, register
    from edgelab.models.parity import run_isolated

    stage = CONTROLLER_STAGES[kind][1]
    ex = export(stage, CONTROLLER_RUNTIMES[runtime])
    with session_scope(engine) as s:
        art = register(s, ex, pipeline)
    ex = replace(ex, artifact=art.name)
    return ex, run_isolated(stage)
