"""A result's provenance block (DESIGN §5: ``provenance``), and completing it: every field filled, or
said ``unknown``.

- ``runtime_build`` / ``runtime_sha256``: the reference runtime is edgelab's own code (build =
  ``edgelab <version> reference``, SHA-256 over its source files); any other runtime is known by
  its registered runtime artifact (kind ``runtime``) in the plan, else ``unknown``;
- ``artifacts``: every planned artifact's name -> its SHA-256 (the registered digest), ``unknown``
  for one the registry does not hold;
- ``weights``: ``random`` for the reference runtime; else the weights artifact's own word
  (``meta.weights`` / ``provenance.weights``, e.g. ``edgelab model synth`` says random), else ``unknown``;
- ``cache``: observed, not assumed: ``cold`` for the first run of this runtime and artifact set on
  the device since those artifacts were last pushed (verified into its store), ``warm`` after one;
  the basis is kept in ``cache_basis``;
- ``power``: the device's own word from its latest probe (power mode, battery level, charger or
  battery), ``unknown`` when it says nothing.

A field nobody knows is the string ``unknown``, never null, so a reader (and the matrix) can tell
"not recorded" from a value.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

import edgelab
from edgelab import __version__
from edgelab.errors import ConfigError, NotFound
from edgelab.transport.quoting import Shell, join

UNKNOWN = "unknown"

PROVENANCE_KEYS = (
    "device",
    "device_class",
    "facts_hash",
    "virtual",
    "runtime",
    "runtime_build",
    "runtime_sha256",
    "artifacts",
    "strategy",
    "profile",
    "command",
    "edgelab_version",
    "git",
    "cache",
    "power",
    "source",
)


def git_state(path: Path | None = None) -> dict[str, Any] | None:
    """The commit and dirtiness of the edgelab checkout (None when not a git work tree)."""
    where = path or Path(edgelab.__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {
        "commit": head.stdout.strip(),
        "dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None,
    }


def provenance(
    session: Session | None = None,
    *,
    device: str | None = None,
    virtual: bool | None = None,
    runtime: str | None = None,
    runtime_build: str | None = None,
    runtime_sha256: str | None = None,
    artifacts: dict[str, str] | None = None,
    strategy: str | None = None,
    profile: str | None = None,
    command: Sequence[str] | str | None = None,
    cache: str | None = None,
    power: str | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    """The provenance block. With a session and a device name, the device's latest probe gives
    its facts hash, class and virtual flag."""
    facts_hash = device_class = None
    if session is not None and device:
        from edgelab.store.snapshots import latest_snapshot

        try:
            snap = latest_snapshot(session, device)
            facts_hash, device_class = snap.facts_hash, snap.device_class
            if virtual is None:
                virtual = snap.virtual
        except NotFound:
            pass
    if cache not in (None, "cold", "warm"):
        raise ConfigError(f"cache condition {cache!r} is neither cold nor warm", remedy="pass cold or warm")
    cmd = command if command is None or isinstance(command, str) else join(list(command), Shell.POSIX)
    return {
        "device": device,
        "device_class": device_class,
        "facts_hash": facts_hash,
        "virtual": virtual,
        "runtime": runtime,
        "runtime_build": runtime_build,
        "runtime_sha256": runtime_sha256,
        "artifacts": dict(artifacts) if artifacts is not None else None,
        "strategy": strategy,
        "profile": profile,
        "command": cmd,
        "edgelab_version": __version__,
        "git": git_state(),
        "cache": cache,
        "power": power,
        "source": source,
    }


def reference_build() -> tuple[str, str]:
    """(build, SHA-256) of the reference runtime: edgelab's reference package, file by file."""
    # the files are read, not imported: the reference runtime sits above metrics (it emits events)
    ref = Path(__file__).resolve().parents[1] / "reference"
    h = hashlib.sha256()
    for f in sorted(ref.rglob("*.py")):
        h.update(f.relative_to(ref).as_posix().encode() + b"\0")
        h.update(f.read_bytes())
    return f"edgelab {__version__} reference (python)", h.hexdigest()


def _artifact(session: Session, name: str | None):
    from edgelab.store.artifacts import Artifact

    if not name:
        return None
    return session.exec(select(Artifact).where(Artifact.name == name)).first()


def power_condition(facts: dict[str, Any] | None) -> dict[str, Any] | str:
    """What the device said about its power in its latest probe; ``unknown`` when nothing."""
    p = (facts or {}).get("power") or {}
    out: dict[str, Any] = {}
    if p.get("power_mode") is not None:
        out["mode"] = p["power_mode"]
    if p.get("power_mode_id") is not None:
        out["mode_id"] = p["power_mode_id"]
    b = p.get("battery") or {}
    if b:
        for src, dst in (("level_pct", "battery_pct"), ("status", "battery_status"), ("plugged", "charger")):
            if b.get(src) is not None:
                out[dst] = b[src]
        if "charger" in out:
            out["on"] = (
                "battery" if str(out["charger"]).lower() in ("none", "unplugged", "0", "") else "charger"
            )
    return out or UNKNOWN


def observe_cache(
    session: Session,
    *,
    device: str,
    runtime: str | None,
    artifact_digests: list[str],
    exclude_run: str | None = None,
) -> tuple[str, str]:
    """(cold|warm, why): warm only when an earlier run of the same runtime and artifacts ran on the
    device after those artifacts' last push."""
    from edgelab.store.devices import get_device
    from edgelab.store.runs import Run

    pushed: datetime | None = None
    if artifact_digests:
        from edgelab.store.artifacts import Artifact, ArtifactFile, DeviceStoreEntry

        dev = get_device(session, device)
        # a digest is an artifact's (its files are the blobs) or already a blob's own SHA-256
        shas = session.exec(
            select(ArtifactFile.sha256)
            .join(Artifact, Artifact.id == ArtifactFile.artifact_id)
            .where(Artifact.digest.in_(artifact_digests))
        ).all()
        stamps = session.exec(
            select(DeviceStoreEntry.verified_at).where(
                DeviceStoreEntry.device_id == dev.id, DeviceStoreEntry.sha256.in_([*shas, *artifact_digests])
            )
        ).all()
        pushed = max(stamps) if stamps else None
    q = select(Run).where(
        Run.device_name == device, Run.runtime == runtime, Run.state.in_(("finished", "running", "stopped"))
    )
    for run in session.exec(q.order_by(Run.created_at.desc())).all():
        if run.id == exclude_run:
            continue
        prov = run.provenance or {}
        digests = (
            sorted(v for v in (prov.get("artifacts") or {}).values())
            if isinstance(prov.get("artifacts"), dict)
            else []
        )
        if digests != sorted(artifact_digests):
            continue
        if pushed is None or run.created_at >= pushed:
            return "warm", f"run {run.id} loaded the same runtime and artifacts here before"
    if pushed is not None:
        return "cold", f"first load since the artifacts were pushed at {pushed.isoformat()}"
    return "cold", "first run of this runtime and artifact set on this device"


def complete(
    session: Session,
    prov: dict[str, Any],
    *,
    device: str | None,
    runtime: str | None,
    plan: dict[str, Any] | None = None,
    facts: dict[str, Any] | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """``prov`` with runtime build, artifacts, weights, cache and power filled (``unknown`` if not known)."""
    out = dict(prov)
    arts: dict[str, str] = {}
    weights = None
    build = sha = None
    if runtime == "reference":
        build, sha = reference_build()
        weights = "random"
    for a in (plan or {}).get("artifacts") or []:
        if a.get("present") is False or "placeholder" in a:
            continue  # planned but not used (the reference zipapp on a virtual device): nothing ran from it
        name = a.get("name")
        row = _artifact(session, name)
        label = a.get("role") or name or "?"
        arts[label] = a.get("sha256") or (row.digest if row is not None else UNKNOWN)
        if weights is None and a.get("weights"):
            weights = a["weights"]
        if row is None:
            continue
        if row.kind == "runtime" and build is None:
            build, sha = row.provenance.get("build") or row.name, row.digest
        if row.kind == "weights" and weights is None:
            weights = row.meta.get("weights") or row.provenance.get("weights")
    out["runtime_build"] = out.get("runtime_build") or build or UNKNOWN
    out["runtime_sha256"] = out.get("runtime_sha256") or sha or UNKNOWN
    if out.get("artifacts") is None:
        out["artifacts"] = arts
    out["weights"] = out.get("weights") or weights or UNKNOWN
    if out.get("cache") in (None, UNKNOWN) and device:
        digests = [d for d in arts.values() if d != UNKNOWN]
        out["cache"], out["cache_basis"] = observe_cache(
            session, device=device, runtime=runtime, artifact_digests=digests, exclude_run=run_id
        )
    out["cache"] = out.get("cache") or UNKNOWN
    if out.get("power") in (None, UNKNOWN):
        out["power"] = power_condition(facts)
    for key in ("facts_hash", "device_class", "profile", "strategy"):
        if out.get(key) is None and key in out:
            out[key] = UNKNOWN
    return out


def for_plan(
    session: Session,
    *,
    device: str,
    virtual: bool,
    plan: dict[str, Any],
    facts_hash: str | None,
    profile: str | None,
    command: str | None,
    source: str,
    run_id: str | None = None,
) -> dict[str, Any]:
    """The whole provenance block of a planned workload (a deployment or a bench run) on a device."""
    from edgelab.errors import NotFound
    from edgelab.store.snapshots import latest_snapshot

    prov = provenance(
        session,
        device=device,
        virtual=virtual,
        runtime=plan.get("runtime"),
        strategy=plan.get("strategy"),
        profile=profile,
        command=command,
        source=source,
    )
    prov["facts_hash"] = prov["facts_hash"] or facts_hash
    try:
        facts = latest_snapshot(session, device).facts or {}
    except NotFound:
        facts = {}
    return complete(
        session, prov, device=device, runtime=plan.get("runtime"), plan=plan, facts=facts, run_id=run_id
    )


def complete_on_device(
    session: Session,
    prov: dict[str, Any],
    *,
    device: str,
    runtime: str | None,
    plan: dict[str, Any] | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """:func:`complete` with the device's latest probe facts (its power word)."""
    from edgelab.errors import NotFound
    from edgelab.store.snapshots import latest_snapshot

    try:
        facts = latest_snapshot(session, device).facts or {}
    except NotFound:
        facts = {}
    return complete(session, prov, device=device, runtime=runtime, plan=plan, facts=facts, run_id=run_id)
