"""A plan's artifacts: resolved from the registry by role and target, pushed content-addressed.

Resolution happens while planning (no connection), so a plan whose artifacts are not registered is
refused before anything is reserved or pushed. A launch template names what it needs: the
runtime's build for the launch target (linked into the process's ``{bin}``) and the files bound to
placeholders (``{model}``: a GGUF; ``{pyz}``: the reference zipapp). The reference runtime needs no
build on a virtual device (the lab's interpreter has edgelab), but when its zipapp is registered
the plan pushes it and runs the workload from the device store (``PYTHONPATH=<blob>``), exactly as
a real runtime build is used; a real device needs it. Pushes go through edgelab.artifacts (resumable, verified on the
device, skipped when the store already holds the bytes).
"""

from __future__ import annotations

import posixpath
from dataclasses import replace
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from edgelab.deploy.artifact_need import ArtifactNeed, ResolvedArtifact
from edgelab.deploy.plan import ExecutionPlan, ProcessSpec, programs
from edgelab.deploy.strategies.common import REFERENCE
from edgelab.runtimes.launch import ART, BIN, bind_artifacts
from edgelab.store.artifacts import Artifact, ArtifactFile
from edgelab.transport.base import Transport

BLOB = "{blob:%s}"  # placeholder for a blob's path in the device store, filled in at launch
DIR = "{dir:%s}"  # placeholder for a folder of links in the process's workdir (an artifact laid out)


def _candidates(session: Session, targets: list[str]) -> list[Artifact]:
    want = [*targets, "any"]
    rows = session.exec(
        select(Artifact).where(col(Artifact.target).in_(want)).order_by(col(Artifact.id).desc())
    ).all()
    return sorted(rows, key=lambda a: want.index(a.target))  # the most specific target first


def _matches(a: Artifact, role: str) -> bool:
    return (a.meta or {}).get("role") == role or a.component == role or a.name == role


def _files(session: Session, art: Artifact) -> list[ArtifactFile]:
    return list(session.exec(select(ArtifactFile).where(ArtifactFile.artifact_id == art.id)).all())


def _program(product: str) -> str:
    """The name a template runs a product by: ``{bin}/llama-server`` starts ``llama-server.exe`` on
    Windows as CreateProcess does (a name without an extension gets ``.exe``)."""
    return product[:-4] if product.lower().endswith(".exe") else product


def _runtime_build(cands: list[Artifact], runtime: str, programs: set[str]) -> list[Artifact]:
    """The build's artifacts: one with every file, or (``edgelab runtime build``) one per product,
    all from the build that made the first program the template runs."""
    mine = [
        a
        for a in cands
        if a.kind == "runtime" and (a.component == runtime or (a.meta or {}).get("runtime") == runtime)
    ]
    per_product = [a for a in mine if (a.meta or {}).get("product")]
    if not per_product:
        return mine[:1]
    first = next((a for p in sorted(programs) for a in per_product if _program(a.meta["product"]) == p), None)
    if first is None:
        return []
    key = first.meta.get("build_key")
    out: dict[str, Artifact] = {}
    for a in per_product:
        if a.meta.get("build_key") == key and a.target == first.target:
            out.setdefault(a.meta["product"], a)
    if not programs <= {_program(p) for p in out}:
        return []
    return [first, *[a for p, a in sorted(out.items()) if a is not first]]


def _model(cands: list[Artifact], need: ArtifactNeed, name: str | None) -> Artifact | None:
    """The newest model for the pipeline (``component``/``meta.pipeline``/name prefix); a need with a
    role (talker, code2wav, mmproj) takes only an artifact of that role (``meta.role``, or component)."""
    kinds = {"model", "weights"} if need.kind in ("model", "weights") else {need.kind}
    pipe, role = need.pipeline, need.want_role
    for a in cands:
        if a.kind not in kinds:
            continue
        if name is not None:
            if a.name == name:
                return a
            continue
        meta = a.meta or {}
        pipe_ok = (
            meta.get("pipeline") == pipe
            or a.component == pipe
            or a.name == pipe
            or a.name.startswith(f"{pipe}-")
        )
        role_ok = role is None or meta.get("role") == role or a.component == role
        if pipe_ok and role_ok:
            return a
    return None


def _file(files: list[ArtifactFile], ext: str | None) -> ArtifactFile | None:
    return next((f for f in files if ext is None or f.path.endswith(ext)), None)


def _resolve_template_need(
    session: Session,
    proc: ProcessSpec,
    need: ArtifactNeed,
    targets: list[str],
    model: str | None,
    notes: list[str],
) -> ResolvedArtifact:
    """``need`` looked up; ``proc`` (the plan's copy being bound) gets its links, dirs and bound
    argv/env; a note says when a fallback stands in for a missing file."""
    want = [
        need.target or "",
        *([t for t in targets if t != need.target] if need.runtime == REFERENCE else []),
    ]
    cands = _candidates(session, want)
    group: list[Artifact] = []
    found: dict[str, Any] = {}
    if need.kind == "runtime":
        found["programs"] = sorted(programs(proc))
        group = _runtime_build(cands, need.runtime or "", set(found["programs"]))
        art = group[0] if group else None
    else:  # only artifacts that hold a file of the wanted type (an .onnx need never binds the .mnn export)
        ext = need.ext
        with_ext = [a for a in cands if ext is None or any(f.path.endswith(ext) for f in _files(session, a))]
        art = _model(with_ext, need, model)
    files = [f for a in (group or ([art] if art is not None else [])) for f in _files(session, a)]
    bound = need.placeholder is not None
    f = _file(files, need.ext) if bound else None
    present = art is not None and (not bound or f is not None)
    found["present"] = present
    if art is not None:
        found.update(name=art.name, digest=art.digest, target=art.target)
        if len(files) == 1:
            found["sha256"] = files[0].sha256
        meta = art.meta or {}
        if meta.get("weights"):
            found["weights"] = meta["weights"]
    if not present:
        if need.placeholder is not None and need.fallback is not None:
            # the runtime gets the fallback value instead (vLLM: a model id it downloads itself)
            _bind(proc, need.placeholder, str(need.fallback))
            found["optional"] = True
            notes.append(
                f"{proc.name}: no {need.ext or ''} {need.kind} registered for "
                f"{need.pipeline}: {need.placeholder} is {need.fallback} (fetched on the device)"
            )
        elif need.placeholder is not None and need.optional:
            token = ART % need.placeholder
            proc.env = {k: v for k, v in proc.env.items() if token not in v}
        return need.resolved(**found)
    assert art is not None  # present: an artifact was found
    if need.placeholder is None:  # the build itself: every file linked into {bin} by its name
        proc.links = {posixpath.basename(x.path): x.sha256 for x in files}
        found["files"] = {x.path: x.sha256 for x in files}
        found["names"] = [a.name for a in group]
        for k in ("isa", "cuda_archs", "source_commit", "build_key"):
            if (art.meta or {}).get(k):
                found[k] = art.meta[k]
        return need.resolved(**found)
    if need.layout == "dir":  # every file, linked into a folder of the workdir by its path
        tree = _tree({x.path: x.sha256 for x in files})
        proc.dirs = {**proc.dirs, need.placeholder: tree}
        found["files"] = tree
        found["sha256"] = art.digest
        _bind(proc, need.placeholder, DIR % need.placeholder)
        return need.resolved(**found)
    assert f is not None  # present, with a placeholder: the file of the wanted type was found
    found["sha256"] = f.sha256
    found["file"] = f.path
    found["bytes"] = f.size  # what admission sizes the model by (edgelab.deploy.sizing)
    recipe = (art.meta or {}).get("recipe") or {}
    if all(recipe.get(k) for k in ("n_layer", "n_head_kv", "head_dim")):
        found["shape"] = {k: recipe[k] for k in ("n_layer", "n_head_kv", "head_dim")}
    proc.argv = bind_artifacts(proc.argv, {need.placeholder: f.sha256})
    proc.env = dict(
        zip(proc.env, bind_artifacts(list(proc.env.values()), {need.placeholder: f.sha256}), strict=True)
    )
    return need.resolved(**found)


def _bind(proc: ProcessSpec, placeholder: str, value: str) -> None:
    token = ART % placeholder
    proc.argv = [w.replace(token, value) for w in proc.argv]
    proc.env = {k: v.replace(token, value) for k, v in proc.env.items()}


def _tree(files: dict[str, str]) -> dict[str, str]:
    """Paths inside the artifact; a single top folder (``edgelab artifact add DIR``) is dropped."""
    tops = {path.split("/", 1)[0] for path in files}
    if len(tops) == 1 and all("/" in path for path in files):
        return {path.split("/", 1)[1]: sha for path, sha in files.items()}
    return dict(files)


def resolve(
    session: Session, p: ExecutionPlan, targets: list[str], model: str | None = None
) -> ExecutionPlan:
    """The plan with each artifact looked up: a :class:`ResolvedArtifact`, present (with name,
    files, SHA-256) or missing; ``p`` itself is left as it was.

    Template needs (a runtime build for the launch target, a model file bound to ``{model}``) bind
    the returned plan's copies of the rendered processes: the build's files become the process's
    ``{bin}`` links, a bound file's placeholder becomes ``{blob:SHA}``. An optional need that is
    missing drops what used it (the reference zipapp's PYTHONPATH on a virtual device, whose
    interpreter has edgelab already). ``model`` names the model artifact to use instead of the
    newest one for the pipeline.
    """
    cands = _candidates(session, targets)
    procs = [replace(pr, argv=list(pr.argv), env=dict(pr.env), dirs=dict(pr.dirs)) for pr in p.processes]
    by_name = {pr.name: pr for pr in procs}
    notes = list(p.notes)
    resolved: list[ArtifactNeed] = []
    for need in p.artifacts:
        if need.kind is not None and need.process is not None:
            resolved.append(
                _resolve_template_need(session, by_name[need.process], need, targets, model, notes)
            )
            continue
        art = next((a for a in cands if _matches(a, need.role)), None)
        found = {"name": art.name, "digest": art.digest, "target": art.target} if art is not None else {}
        resolved.append(need.resolved(present=art is not None, **found))
    for e in resolved:
        if isinstance(e, ResolvedArtifact) and e.build and e.present:
            notes.append(f"{e.runtime} runtime from the device store: {e.name} ({(e.digest or '')[:12]})")
    return replace(p, processes=procs, artifacts=resolved, notes=notes)


def remedy_for(need: ArtifactNeed) -> str:
    """What to do about one missing artifact."""
    if need.kind == "runtime":
        rt, target = need.runtime, need.target
        return (
            f"`edgelab runtime build {rt} --target {target}`, or register a build: "
            f"`edgelab artifact add NAME FILES... --kind runtime --target {target} --component {rt}`"
        )
    if need.kind in ("model", "weights"):
        synth = (
            f"`edgelab model synth {need.pipeline}` (random weights) or "
            if need.pipeline_kind in ("text_lm", "tts") and need.ext == ".gguf"
            else ""
        )
        return (
            f"register a {need.ext or ''} model for {need.pipeline}: {synth}"
            f"`edgelab artifact add NAME FILE --kind model --target any --component {need.pipeline}`"
            + (f" --meta role={need.want_role}" if need.want_role else "")
        )
    return "build or export it and register it (`edgelab artifact add`)"


def missing(p: ExecutionPlan) -> list[str]:
    return [a.role for a in missing_entries(p)]


def missing_entries(p: ExecutionPlan) -> list[ArtifactNeed]:
    """The needs neither found nor optional (a need not looked up yet counts as not found)."""
    return [a for a in p.artifacts if not a.present and not a.optional]


def push(
    engine: Engine, t: Transport, device_id: int, p: ExecutionPlan
) -> tuple[dict[str, str], dict[str, int]]:
    """Push every present artifact's files; returns {sha256: device path} and counts per status."""
    from edgelab.artifacts.devstore import open_store
    from edgelab.artifacts.push import push_blob
    from edgelab.artifacts.service import blobs_for
    from edgelab.artifacts.stamps import DbStamps

    names = sorted({n for a in p.present_artifacts() if a.name for n in (a.names or [a.name])})
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


def fill(env: dict[str, str], paths: dict[str, str], bin_dir: str | None = None) -> dict[str, str]:
    """Replace blob placeholders with the pushed paths (and ``{bin}`` with the link directory)."""
    return dict(zip(env, fill_words(list(env.values()), paths, bin_dir), strict=True))


def fill_words(words: list[str], paths: dict[str, str], bin_dir: str | None = None) -> list[str]:
    out = []
    for v in words:
        for sha, path in paths.items():
            v = v.replace(BLOB % sha, path)
        if bin_dir is not None:
            v = v.replace(BIN, bin_dir)
        out.append(v)
    return out


def record(p: ExecutionPlan) -> dict[str, Any]:
    return {a.role: a.name if isinstance(a, ResolvedArtifact) else None for a in p.artifacts}
