"""The deploy dialog's actions: dry run, launch and stop, through ``edgelab.deploy``: planning (the
dry run), launch (deploy) and control (stop).

What the dialog shows (strategy decisions, plan rows) is the read model ``edgelab.views.plan``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine


def dry_run(
    engine: Engine,
    device: str,
    pipeline: str,
    strategy: str | None = None,
    runtime: str | None = None,
    endpoint: str | None = None,
) -> dict[str, Any]:
    """The plan and its admission without reserving or touching anything (``edgelab deploy --dry-run``)."""
    from edgelab.deploy.planning import DeployRequest, plan

    return plan(
        engine,
        DeployRequest(
            device=device, pipeline=pipeline, strategy=strategy, runtime=runtime, endpoint=endpoint
        ),
    ).to_dict()


def launch(
    engine: Engine,
    device: str,
    pipeline: str,
    strategy: str | None = None,
    runtime: str | None = None,
    endpoint: str | None = None,
) -> str:
    """Plan, admit, push, launch and wait until ready; returns the run id (Refusal before anything runs).

    Followed as ``edgelab deploy`` follows: by a detached follower, since the deployment runs on
    after the TUI is closed and its metrics must be stored whether or not a screen shows it."""
    from edgelab.deploy.launch import deploy
    from edgelab.deploy.planning import DeployRequest
    from edgelab.deploy.supervise import Follow

    return str(
        deploy(
            engine,
            DeployRequest(
                device=device, pipeline=pipeline, strategy=strategy, runtime=runtime, endpoint=endpoint
            ),
            follow=Follow.DETACHED,
        ).run_id
    )


def stop(engine: Engine, run_id: str) -> str:
    """Stop a run's processes through the deploy layer (verified gone, reservation released, its log
    read to the end); a run under someone else's lease is refused naming whose (the CLI's
    ``stop --force`` overrides)."""
    from edgelab.deploy.supervise import stop as stop_run
    from edgelab.lease.owner import whoami

    return str(stop_run(engine, run_id, holder=whoami()).state)
