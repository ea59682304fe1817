"""A plan's artifacts: resolved from the registry by role and target, pushed content-addressed.

Resolution happens while planning (no connection), so a plan whose artifacts are not registered is
refused before anything is reserved or pushed. The reference runtime needs none (random weights),
but when its zipapp is registered for the device's target (``edgelab runtime build reference``)
the plan pushes it and runs the workload from the device store (``PYTHONPATH=<blob>``), exactly
as a real runtime build is used. Pushes go through edgelab.artifacts (resumable, verified on the
device, skipped when the store already holds the bytes).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session, select

from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.strategies.common import REFERENCE
from edgelab.store.artifacts import Artifact, ArtifactFile
from edgelab.transport.base import Transport

BLOB = "{blob:%s}"  # placeholder for a blob's path in the device store, filled in at launch


def _candidates(session: Session, targets: list[str]) -> list[Artifact]:
    want = [*targets, "any"]
    rows = session.exec(select(Artifact).where(Artifact.target.in_(want)).order_by(Artifact.id.desc())).all()
    return sorted(rows, key=lambda a: want.index(a.target))  # the most specific target first


def _matches(a: Artifact, role: str) -> bool:
    return (a.meta or {}).get("role") == role or a.component == role or a.name == role


def resolve(session: Session, p: ExecutionPlan, targets: list[str]) -> None:
    """Mark each of the plan's artifacts present (with name and files) or missing; add the reference zipapp."""
    cands = _candidates(session, targets)
    for entry in p.artifacts:
        art = next((a for a in cands if _matches(a, entry["role"])), None)
        entry["present"] = art is not None
        if art is not None:
            entry.update(name=art.name, digest=art.digest, target=art.target)
    if p.runtime != REFERENCE:
        return
    ref = next((a for a in cands if a.kind == "runtime" and a.component == REFERENCE), None)
    if ref is None:
        return
    files = session.exec(select(ArtifactFile).where(ArtifactFile.artifact_id == ref.id)).all()
    pyz = next((f for f in files if f.path.endswith(".pyz")), None)
    if pyz is None:
        return
    p.artifacts.append({"role": "runtime.reference", "stage": None, "present": True, "name": ref.name,
                        "digest": ref.digest, "target": ref.target, "sha256": pyz.sha256})
    for proc in p.processes:
        if "edgelab.reference" in proc.argv:
            proc.env = {**proc.env, "PYTHONPATH": BLOB % pyz.sha256}
    p.notes.append(f"reference runtime from the device store: {ref.name} ({pyz.sha256[:12]})")


def missing(p: ExecutionPlan) -> list[str]:
    return [a["role"] for a in p.artifacts if not a.get("present")]


def push(engine: Engine, t: Transport, device_id: int, p: ExecutionPlan) -> tuple[dict[str, str], dict[str, int]]:
    """Push every present artifact's files; returns {sha256: device path} and counts per status."""
    from edgelab.artifacts.devstore import open_store
    from edgelab.artifacts.push import push_blob
    from edgelab.artifacts.service import blobs_for
    from edgelab.artifacts.stamps import DbStamps

    names = sorted({a["name"] for a in p.artifacts if a.get("present") and a.get("name")})
    if not names:
        return {}, {}
    store = open_store(t)
    stamps = DbStamps(engine, device_id)
    paths: dict[str, str] = {}
    counts: dict[str, int] = {}
    for blob in blobs_for(engine, names):
        res = push_blob(store, blob, stamps=stamps)
        paths[blob.sha256] = res.remote_path
        counts[res.status] = counts.get(res.status, 0) + 1
    return paths, counts


def fill(env: dict[str, str], paths: dict[str, str]) -> dict[str, str]:
    """Replace blob placeholders with the pushed paths."""
    out = {}
    for k, v in env.items():
        for sha, path in paths.items():
            v = v.replace(BLOB % sha, path)
        out[k] = v
    return out


def record(p: ExecutionPlan) -> dict[str, Any]:
    return {a["role"]: a.get("name") for a in p.artifacts}
