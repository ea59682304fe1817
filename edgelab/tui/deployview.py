"""The deploy dialog's data: the profile's strategy decisions, the dry-run plan with admission, launch.

Thin over ``edgelab.deploy``: planning (the dry run), launch (deploy) and control (stop).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from edgelab.store.db import session_scope
from edgelab.store.snapshots import latest_snapshot
from edgelab.tui.data import derive_profile_dict


def pipelines() -> list[str]:
    from edgelab.catalog.pipelines import load_pipelines

    return sorted(load_pipelines())


def strategies(engine: Engine, device: str, pipeline: str) -> dict[str, Any]:
    """The profile's decisions for ``pipeline`` on ``device``: eligible ones and refused ones, each with why."""
    with session_scope(engine, write=False) as s:
        snap = latest_snapshot(s, device)
        facts = dict(snap.facts or {})
    prof = derive_profile_dict(facts, pipeline)
    pp = next(p for p in prof["pipelines"] if p["pipeline"] == pipeline)
    return {
        "runtime_target": prof.get("runtime_target"),
        "quantization": pp.get("quantization"),
        "eligible": [s for s in pp["strategies"] if s["eligible"]],
        "refused": [s for s in pp["strategies"] if not s["eligible"]],
    }


def runtimes() -> list[str]:
    """The runtimes the catalog knows (runtimes/*.yaml), for the dialog's choice."""
    try:
        from edgelab.runtimes.launch import runtimes as catalog

        return sorted(catalog())
    except Exception:  # noqa: BLE001 - a broken catalog must not break the dialog; the plan says why
        return []


def dry_run(engine: Engine, device: str, pipeline: str, strategy: str | None = None,
            runtime: str | None = None, endpoint: str | None = None) -> dict[str, Any]:
    """The plan and its admission without reserving or touching anything (``edgelab deploy --dry-run``)."""
    from edgelab.deploy.planning import DeployRequest, plan

    planned = plan(engine, DeployRequest(device=device, pipeline=pipeline, strategy=strategy, runtime=runtime,
                                         endpoint=endpoint))
    return planned.to_dict()


def launch(engine: Engine, device: str, pipeline: str, strategy: str | None = None,
           runtime: str | None = None, endpoint: str | None = None) -> str:
    """Plan, admit, push, launch and wait until ready; returns the run id (Refusal before anything runs)."""
    from edgelab.deploy.launch import deploy
    from edgelab.deploy.planning import DeployRequest

    dep = deploy(engine, DeployRequest(device=device, pipeline=pipeline, strategy=strategy, runtime=runtime,
                                       endpoint=endpoint))
    return str(dep.run_id)


def stop(engine: Engine, run_id: str) -> str:
    """Stop a run's processes through the deploy layer (verified gone, reservation released)."""
    from edgelab.deploy.control import stop as stop_run

    dep = stop_run(engine, run_id)
    return str(getattr(dep, "state", "stopped"))


def plan_lines(planned: dict[str, Any]) -> list[tuple[str, str]]:
    """The dry-run as (key, value) rows the dialog renders."""
    p = planned.get("plan") or {}
    rows = [
        ("strategy", f"{p.get('strategy')}: {p.get('reason')}"),
        ("runtime", str(p.get("runtime"))),
    ]
    for st in p.get("stages") or []:
        rows.append((f"stage {st['name']}", f"{st['runtime']} / {st['backend']} on {st['placement']}"))
    for pr in p.get("processes") or []:
        rows.append((f"process {pr['name']}", " ".join(pr["argv"])))
    for pool, n in (p.get("memory") or {}).items():
        rows.append((f"reserves {pool}", f"{n / 1024**3:.2f} GiB"))
    for line in planned.get("admission") or []:
        if line.get("text"):
            rows.append(("admission", ("ok  " if line.get("fits") else "REFUSED  ") + line["text"]))
    for a in p.get("artifacts") or []:
        rows.append((f"artifact {a.get('role')}", f"{a.get('name')} ({'present' if a.get('present') else 'missing'})"))
    for r in p.get("refused") or []:
        rows.append((f"not {r.get('strategy')}", str(r.get("reason") or r.get("code"))))
    ref = planned.get("refusal")
    if ref:
        rows.append(("REFUSED", f"{ref['code']}: {ref['message']}"))
        rows.append(("remedy", str(ref.get("remedy"))))
    if planned.get("virtual"):
        rows.append(("VIRTUAL", "a virtual device: this run demonstrates the machinery and qualifies nothing"))
    return rows
