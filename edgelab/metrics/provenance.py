"""The provenance of every run, built by one function (:func:`run_provenance`) for every kind of
run (a deployment, a bench, a playbook's runs, an external endpoint, an import): the same keys with
the same meanings, so a reader (``runs show``, the matrix's evidence check) never guesses.

Keys (:data:`PROVENANCE_KEYS`), and what each means everywhere:

- ``source``: what made the run (``deploy``, ``bench:<protocol>``, ``bench:<protocol>:endpoint``,
  ``imported``); ``play``: the playbook, job and step that ran it, null outside a playbook;
- ``device``, ``device_class``, ``facts_hash``, ``virtual``: the device and its latest probe;
- ``runtime``, ``strategy``, ``strategy_label`` (``S1 (reference imitation)`` where the reference
  stood in), ``profile`` (the device class the plan was derived for);
- ``runtime_build`` / ``runtime_sha256``: the runtime build that ran and the SHA-256 of that build
  artifact (its registered digest: every file's name and SHA-256), never one file's hash; for
  edgelab's own python workloads run by the lab's interpreter (the reference, the S3 controller on
  a virtual device) the package and the SHA-256 over its source files; ``runtime_target``: the
  build's target; ``execution``: how a virtual device ran it (natively, emulated under qemu or
  wine, or the lab host's build; null on a real device);
- ``program``: the executable that ran (``{name, sha256}`` of that file), null for ``python -m``;
- ``runtime_library``: the inference library and its version as loaded: llama.cpp is linked into
  its program (its source commit, the program's SHA-256); MNN and ONNX Runtime are reported by the
  controller that loaded them (version, path and SHA-256 of the shared library);
- ``artifacts``: every artifact the run used, role -> SHA-256 (a model: the file the process
  loaded; a build: the build's digest); ``models``: per model role its artifact, file, size,
  format and ``weights``; ``weights``: ``random``, ``real``, ``mixed`` or ``unknown`` over them;
- ``command`` (as launched, a URL's password masked), ``threads`` (the count the command was given; null when it sets
  none and the runtime picks its own), ``cache`` (``cold``/``warm``, observed) with
  ``cache_basis``, ``power`` (the device's own word);
- ``endpoint``: an external server's URL (masked: ``user:***@``), protocol and what it reported (null when edgelab
  launched the workload); ``imported``: the content hashes of an imported run (null otherwise);
- ``placement`` and ``model_loaded``: what the process reported about itself once it ran (null
  until it does, or when its runtime reports nothing);
- ``edgelab_version``, ``git``.

A value that applies but is not known is the string ``unknown``; null means the key does not
apply to this run (an endpoint on a launched run, a program for ``python -m``).
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
from edgelab.credentials import mask_text, mask_url
from edgelab.errors import ConfigError, NotFound
from edgelab.labels import strategy_label
from edgelab.states import RunState
from edgelab.transport.quoting import join_posix

UNKNOWN = "unknown"

PROVENANCE_KEYS = (
    "source",
    "play",
    "device",
    "device_class",
    "facts_hash",
    "virtual",
    "runtime",
    "strategy",
    "strategy_label",
    "profile",
    "runtime_build",
    "runtime_sha256",
    "runtime_target",
    "execution",
    "program",
    "runtime_library",
    "artifacts",
    "models",
    "weights",
    "command",
    "threads",
    "cache",
    "cache_basis",
    "power",
    "endpoint",
    "imported",
    "placement",
    "model_loaded",
    "edgelab_version",
    "git",
)
OWN_PACKAGES = {"reference": "reference", "mnn": "controller", "onnxruntime": "controller"}
MODEL_KINDS = ("model", "weights", "graph", "other")


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


def run_provenance(
    session: Session | None,
    *,
    source: str,
    device: str | None = None,
    virtual: bool | None = None,
    runtime: str | None = None,
    strategy: str | None = None,
    profile: str | None = None,
    plan: dict[str, Any] | None = None,
    command: Sequence[str] | str | None = None,
    threads: int | str | None = None,
    facts_hash: str | None = None,
    run_id: str | None = None,
    runtime_build: str | None = None,
    runtime_sha256: str | None = None,
    runtime_library: dict[str, Any] | str | None = None,
    artifacts: dict[str, str] | None = None,
    weights: str | None = None,
    cache: str | None = None,
    power: dict[str, Any] | str | None = None,
    endpoint: dict[str, Any] | None = None,
    imported: dict[str, Any] | None = None,
    play: dict[str, Any] | None = None,
    probe: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The provenance block of one run, every key of :data:`PROVENANCE_KEYS` present.

    A launched run passes its ``plan`` (``ExecutionPlan.to_dict()``): the build, program, library,
    artifacts, models, weights, command and threads come from what the plan bound. A run edgelab
    did not launch (an endpoint, an import) passes what it knows; the rest is ``unknown``. With a
    session and a device, the device's latest probe gives class, facts hash, virtual and power, and
    the cache condition is observed (``cache`` given wins: an endpoint's is not observable). ``probe``:
    that probe's facts_hash, device_class, facts and virtual where the caller planned from it (not
    read again, and never a newer probe than the one the plan was made from).
    """
    if cache not in (None, "cold", "warm", UNKNOWN):
        raise ConfigError(f"cache condition {cache!r} is neither cold nor warm", remedy="pass cold or warm")
    facts: dict[str, Any] = {}
    device_class = None
    if probe is None and session is not None and device:
        from edgelab.store.snapshots import latest_snapshot

        try:
            snap = latest_snapshot(session, device)
            probe = {
                "facts_hash": snap.facts_hash,
                "device_class": snap.device_class,
                "facts": snap.facts,
                "virtual": snap.virtual,
            }
        except NotFound:
            pass
    if probe is not None:
        facts_hash, device_class = facts_hash or probe["facts_hash"], probe["device_class"]
        facts = probe["facts"] or {}
        virtual = probe["virtual"] if virtual is None else virtual
    bound = _from_plan(session, plan, runtime) if plan else {}
    arts = dict(artifacts) if artifacts is not None else bound.get("artifacts", {})
    if command is None and plan:
        command = (
            " ".join(" ".join(pr.get("argv") or []) for pr in plan.get("processes") or [])[:4000] or None
        )
    cmd = command if command is None or isinstance(command, str) else join_posix(list(command))
    cmd = mask_text(cmd) if cmd else cmd  # an endpoint's password is never stored, whoever passed it
    if endpoint and endpoint.get("url"):
        endpoint = {**endpoint, "url": mask_url(str(endpoint["url"]))}
    out: dict[str, Any] = {
        "source": source,
        "play": play,
        "device": device,
        "device_class": device_class or (UNKNOWN if device else None),
        "facts_hash": facts_hash or (UNKNOWN if device else None),
        "virtual": virtual,
        "runtime": runtime or UNKNOWN,
        "strategy": strategy,
        "strategy_label": strategy_label(strategy, runtime) if strategy else None,
        "profile": profile or (UNKNOWN if plan else None),
        "runtime_build": runtime_build or bound.get("runtime_build") or UNKNOWN,
        "runtime_sha256": runtime_sha256 or bound.get("runtime_sha256") or UNKNOWN,
        "runtime_target": bound.get("runtime_target") or (UNKNOWN if plan else None),
        "execution": (plan or {}).get("execution") or None,
        "program": bound.get("program"),
        "runtime_library": runtime_library or bound.get("runtime_library") or UNKNOWN,
        "artifacts": arts,
        "models": bound.get("models", {}),
        "weights": weights or bound.get("weights") or UNKNOWN,
        "command": cmd or UNKNOWN,
        "threads": threads if threads is not None else (bound.get("threads") if plan else UNKNOWN),
        "cache": cache,
        "cache_basis": None,
        "power": power if power not in (None, UNKNOWN) else (power_condition(facts) if device else UNKNOWN),
        "endpoint": endpoint,
        "imported": imported,
        "placement": None,
        "model_loaded": None,
        "edgelab_version": __version__,
        "git": git_state(),
    }
    if out["cache"] is None and session is not None and device:
        digests = [d for d in arts.values() if d not in (None, UNKNOWN)]
        out["cache"], out["cache_basis"] = observe_cache(
            session, device=device, runtime=runtime, artifact_digests=digests, exclude_run=run_id
        )
    out["cache"] = out["cache"] or UNKNOWN
    return out


def _main_process(plan: dict[str, Any]) -> dict[str, Any]:
    procs = plan.get("processes") or []
    return procs[0] if procs else {}


def _from_plan(session: Session | None, plan: dict[str, Any], runtime: str | None) -> dict[str, Any]:
    """What a plan bound: the build that ran, its program and library, the models and their weights."""
    proc = _main_process(plan)
    ents = [a for a in plan.get("artifacts") or [] if a.get("present")]
    build = next((a for a in ents if a.get("kind") == "runtime" and "placeholder" not in a), None)
    pyz = next((a for a in ents if a.get("kind") == "runtime" and "placeholder" in a), None)
    out: dict[str, Any] = {
        "runtime_target": proc.get("target"),
        "threads": (proc.get("values") or {}).get("threads"),
    }
    arts: dict[str, str] = {}
    if build is not None:  # a build linked into {bin}: its registered digest, and the program that ran
        out["runtime_build"], out["runtime_sha256"] = build.get("name"), build.get("digest")
        arts[build["role"]] = build.get("digest") or UNKNOWN
        program = next((w.split("{bin}/", 1)[1] for w in proc.get("argv") or [] if "{bin}/" in w), None)
        if program:
            sha = (proc.get("links") or {}).get(program)
            out["program"] = {"name": program, "sha256": sha or UNKNOWN}
            out["runtime_library"] = {
                "name": runtime or build.get("runtime"),
                "version": build.get("source_commit") or UNKNOWN,
                "file": program,
                "sha256": sha or UNKNOWN,
                "linked": "static (the program carries the library)",
            }
    elif pyz is not None:  # edgelab's own workload as a zipapp in the device store
        out["runtime_build"], out["runtime_sha256"] = pyz.get("name"), pyz.get("digest")
        arts[pyz["role"]] = pyz.get("sha256") or pyz.get("digest") or UNKNOWN
    elif runtime in OWN_PACKAGES:  # run from the lab's interpreter (a virtual device)
        out["runtime_build"], out["runtime_sha256"] = own_build(OWN_PACKAGES[runtime])
    info = plan.get("runtime_info") or {}
    if info.get("installed"):  # a runtime installed on the device (vLLM-Omni's venv), as its stamp says
        wheels = dict(info.get("wheels_sha256") or {})
        own = next(
            (
                sha
                for name, sha in wheels.items()
                if name.replace("-", "_").startswith(str(runtime).replace("-", "_"))
            ),
            None,
        )
        out["runtime_build"] = (
            f"{runtime} {info.get('vllm_omni') or '?'} (device venv {info.get('venv') or '?'})"
        )
        out["runtime_sha256"] = own or UNKNOWN
        out["runtime_library"] = {
            "name": "vLLM-Omni",
            "version": info.get("vllm_omni") or UNKNOWN,
            "vllm": info.get("vllm"),
            "torch": info.get("torch"),
            "torch_build": info.get("torch_build"),
            "wheels_sha256": wheels,
            "source": "the device's venv stamp",
        }
        if info.get("deploy_config_sha256"):
            arts["deploy_config"] = info["deploy_config_sha256"]
    if runtime == "reference":
        out["runtime_library"] = {
            "name": "edgelab reference (numpy)",
            "version": __version__,
            "sha256": own_build("reference")[1],
        }
    models: dict[str, dict[str, Any]] = {}
    for a in ents:
        if a.get("kind") not in MODEL_KINDS:
            continue
        sha = a.get("sha256") or a.get("digest") or UNKNOWN
        arts[a["role"]] = sha
        word = a.get("weights")
        if word is None and session is not None and a.get("name"):
            word = _weights_word(session, a["name"])
        models[a["role"]] = {
            "artifact": a.get("name"),
            "file": a.get("file"),
            "sha256": sha,
            "bytes": a.get("bytes"),
            "format": (a.get("ext") or "").lstrip(".") or None,
            "weights": word or UNKNOWN,
        }
    out["artifacts"], out["models"] = arts, models
    if models:
        words = {m["weights"] for m in models.values()}
        out["weights"] = next(iter(words)) if len(words) == 1 else (UNKNOWN if UNKNOWN in words else "mixed")
    elif runtime == "reference":
        out["weights"] = "random"  # the reference draws its own weights
    return out


def _weights_word(session: Session, name: str) -> str | None:
    from edgelab.store.artifacts import Artifact

    row = session.exec(select(Artifact).where(Artifact.name == name)).first()
    if row is None:
        return None
    return (row.meta or {}).get("weights") or (row.provenance or {}).get("weights")


def observed(prov: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """``prov`` with what the process reported about itself in its run.start (edgelab's controller:
    placement per stage, the model file it loaded, the runtime library as loaded, its weights)."""
    out = dict(prov)
    if isinstance(meta.get("placement"), dict):
        out["placement"] = meta["placement"]
    model = meta.get("model")
    if isinstance(model, dict) and model.get("sha256"):
        out["model_loaded"] = {"sha256": model["sha256"], "stage": model.get("stage")}
    if isinstance(meta.get("runtime_library"), dict):
        out["runtime_library"] = meta["runtime_library"]
    if meta.get("weights") in ("random", "real") and out.get("weights") in (None, UNKNOWN):
        out["weights"] = meta["weights"]
    return out


def own_build(package: str) -> tuple[str, str]:
    """(build, SHA-256) of one of edgelab's own python workloads (``reference``, ``controller``) run
    by an interpreter that has edgelab: the package's source files, file by file."""
    # the files are read, not imported: those packages sit above metrics (they emit events)
    root = Path(__file__).resolve().parents[1] / package
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(f.read_bytes())
    return f"edgelab {__version__} {package} (python)", h.hexdigest()


def reference_build() -> tuple[str, str]:
    """(build, SHA-256) of the reference runtime: edgelab's reference package, file by file."""
    return own_build("reference")


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
        Run.device_name == device,
        Run.runtime == runtime,
        Run.state.in_((RunState.FINISHED, RunState.RUNNING, RunState.STOPPED)),
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
