"""A deploy plan as rows, and the strategy decisions a deploy dialog offers: what `edgelab deploy
--dry-run` prints and the TUI's deploy dialog shows, built once from the plan's plain data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from edgelab.deploy.artifact_need import ResolvedArtifact, artifact_from_dict
from edgelab.store.db import session_scope
from edgelab.units import gib


@dataclass(frozen=True)
class PlanRow:
    """One line of a plan: a key, its value, and whether it is a problem (refusal, missing part)."""

    key: str
    value: str
    alert: bool = False


def plan_rows(planned: dict[str, Any]) -> list[PlanRow]:
    """The dry run (``Planned.to_dict()``) as rows: strategy and why, runtime, stages, processes,
    reservations, admission, artifacts, start-up, notes, strategies not taken, the refusal."""
    p = planned.get("plan") or {}
    rows = [
        PlanRow("strategy", f"{p.get('strategy')}: {p.get('reason')}"),
        PlanRow("runtime", str(p.get("runtime"))),
    ]
    for st in p.get("stages") or []:
        where = f"{st['runtime']} / {st['backend']} on {st['placement']}"
        rows.append(
            PlanRow(
                f"stage {st['name']}",
                where + (f", needs {', '.join(st['artifacts'])}" if st.get("artifacts") else ""),
            )
        )
    for pr in p.get("processes") or []:
        if pr.get("unavailable"):
            rows.append(PlanRow(f"process {pr['name']}", f"not launchable here: {pr['unavailable']}", True))
            if not pr.get("argv"):
                continue
            rows.append(PlanRow(f"process {pr['name']} would run", " ".join(pr["argv"])))
        else:
            rows.append(PlanRow(f"process {pr['name']}", " ".join(pr["argv"])))
        if pr.get("env"):
            env = " ".join(f"{k}={v}" for k, v in sorted(pr["env"].items()))
            rows.append(PlanRow(f"process {pr['name']} env", env))
        for fname in sorted(pr.get("files") or {}):
            rows.append(PlanRow(f"process {pr['name']} writes", f"{fname} (in its run directory)"))
        rows.append(
            PlanRow(
                f"process {pr['name']} from",
                f"{pr.get('template') or '-'}, ready "
                f"{(pr.get('ready') or {}).get('kind', 'alive')}, adapter {pr.get('adapter')}",
            )
        )
    for pool, n in (p.get("memory") or {}).items():
        rows.append(PlanRow(f"reserves {pool}", gib(n, 2)))
    info = p.get("runtime_info") or {}
    if info.get("installed"):
        rows.append(
            PlanRow(
                "runtime on the device",
                f"vllm-omni {info.get('vllm_omni')}, {info.get('vllm_dist')} {info.get('vllm')}, torch "
                f"{info.get('torch')} ({info.get('torch_build')}) in {info.get('venv')}",
            )
        )
        for wheel, sha in sorted((info.get("wheels_sha256") or {}).items()):
            rows.append(PlanRow("wheel", f"{wheel} sha256 {sha}"))
    dc = (p.get("memory_detail") or {}).get("deploy_config")
    if isinstance(dc, dict):
        rows.append(PlanRow("deploy config", f"{dc.get('file')} sha256 {dc.get('sha256')}"))
    for line in planned.get("admission") or []:
        if line.get("text"):
            fits = bool(line.get("fits"))
            rows.append(PlanRow("admission" if fits else "admission REFUSED", line["text"], not fits))
    for a in (artifact_from_dict(e) for e in p.get("artifacts") or []):
        missing = not a.present
        name = a.name if isinstance(a, ResolvedArtifact) else None
        state = "present" if not missing else ("missing, optional" if a.optional else "missing")
        rows.append(PlanRow(f"artifact {a.role}", f"{name} ({state})", missing and not a.optional))
    if p:
        rows.append(
            PlanRow(
                "start-up",
                f"ready timeout {p.get('ready_timeout_s', 0):g}s, outputs: "
                f"{', '.join(p.get('expected_outputs') or []) or '-'}",
            )
        )
    rows += [PlanRow("note", str(n)) for n in p.get("notes") or []]
    for r in p.get("refused") or []:
        rows.append(PlanRow(f"not {r.get('strategy')}", str(r.get("reason") or r.get("code"))))
    ref = planned.get("refusal")
    if ref:
        rows.append(PlanRow("REFUSED", f"{ref['code']}: {ref['message']}", True))
        rows.append(PlanRow("remedy", str(ref.get("remedy"))))
    ex = p.get("execution") or {}
    if ex:
        rows.append(PlanRow("EMULATED" if ex.get("emulated") else "runs", str(ex.get("label"))))
    if planned.get("virtual"):
        rows.append(
            PlanRow("VIRTUAL", "a virtual device: this run demonstrates the machinery and qualifies nothing")
        )
    return rows


def strategy_decisions(engine: Engine, device: str, pipeline: str) -> dict[str, Any]:
    """The profile's decisions for ``pipeline`` on ``device`` (its newest successful probe): the
    eligible strategies and the refused ones, each with why."""
    from edgelab.profile import profile_from_facts
    from edgelab.store.snapshots import latest_snapshot

    with session_scope(engine, write=False) as s:
        facts = dict(latest_snapshot(s, device).facts or {})
    prof = profile_from_facts(facts, pipeline)
    pp = next(p for p in prof["pipelines"] if p["pipeline"] == pipeline)
    return {
        "runtime_target": prof.get("runtime_target"),
        "quantization": pp.get("quantization"),
        "eligible": [s for s in pp["strategies"] if s["eligible"]],
        "refused": [s for s in pp["strategies"] if not s["eligible"]],
    }


def pipelines() -> list[str]:
    """The packaged pipelines' ids, sorted."""
    from edgelab.catalog.pipelines import load_pipelines

    return sorted(load_pipelines())


def runtimes() -> list[str]:
    """The runtimes the catalog knows (runtimes/*.yaml); empty when the catalog cannot be read (the
    plan then says why)."""
    from edgelab.runtimes.launch import runtimes as catalog

    try:
        return sorted(catalog())
    except Exception:  # noqa: BLE001 - a broken catalog must not break the dialog; the plan says why
        return []
