"""``edgelab runtime install``: a pip runtime's pinned wheels into a virtual environment on the device.

The runtime's build for the device's target (``pip download --no-deps`` of the pinned pair) is
pushed into the device store like any artifact (verified by SHA-256), linked by its wheel names
into ``VENV/.edgelab-wheels/`` and installed there with its dependencies from the device's own
package index, one pip call per ``install`` entry of the recipe (runtimes/*.yaml ``venv:``). Then
the recipe's fix-ups and the import check run inside the venv (edgelab.runtimes.venv_device) and
leave the stamp the probe reads: versions, the wheels' SHA-256s, the torch build, each step's
seconds, whether vllm and vllm_omni import and the platform vLLM-Omni resolves. A virtual device
installs into its persona's home on the lab host (its commands run there).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from sqlalchemy import Engine
from sqlmodel import col, select

from edgelab.deploy.options import Options, connect
from edgelab.deploy.start import layout
from edgelab.errors import ConfigError, EdgelabError, NotFound
from edgelab.runtimes.launch import host_target, runtimes
from edgelab.store.artifacts import Artifact, ArtifactFile
from edgelab.store.db import session_scope
from edgelab.store.devices import get_device
from edgelab.transport.base import Transport

STAMP = ".edgelab-runtime.json"
WHEELS = ".edgelab-wheels"
STEP_TIMEOUT_S = 3600.0  # one pip call (torch and vLLM are large downloads on a slow link)

Progress = Callable[[str], None]


def device_script() -> bytes:
    """The stdlib-only script that runs inside the venv (fix-ups, import check, stamp)."""
    return resources.files("edgelab.runtimes").joinpath("venv_device.py").read_bytes()


def install_target(engine: Engine, device: str, runtime: str) -> str:
    """The build target the device's venv is for: the lab host's on a virtual device, else the first of
    the device's runtime targets (from its newest probe) the recipe has."""
    from edgelab.catalog.devices import load_devices
    from edgelab.probe.facts import Facts
    from edgelab.profile import derive_profile
    from edgelab.store.snapshots import latest_snapshot

    spec = runtimes()[runtime]
    assert spec.venv is not None
    with session_scope(engine, write=False) as s:
        dev = get_device(s, device)
        if dev.virtual:
            targets = [host_target()]
        else:
            facts = Facts.from_dict(latest_snapshot(s, device).facts or {})
            targets = list(derive_profile(facts, load_devices()).runtime_targets or [])
    for t in targets:
        if t in spec.venv.targets:
            return t
    raise ConfigError(
        f"{runtime} has no venv recipe for {device} (targets {', '.join(targets) or 'unknown'})",
        remedy=f"its recipes: {', '.join(spec.venv.targets)}; probe the device again if its facts are old",
    )


def _wheels(engine: Engine, runtime: str, target: str, progress: Progress) -> tuple[str, dict[str, str]]:
    """The registered build of the pinned wheels for ``target`` (built now when there is none):
    its artifact name and {wheel file name: sha256}."""
    from edgelab.config import state_dir
    from edgelab.runtimes.build import build_runtime

    spec = runtimes()[runtime]
    with session_scope(engine) as s:
        art = s.exec(
            select(Artifact)
            .where(Artifact.kind == "runtime", Artifact.component == runtime, Artifact.target == target)
            .order_by(col(Artifact.id).desc())
        ).first()
        if art is None:
            progress(f"no {runtime} build for {target} registered: downloading the pinned wheels")
            art = build_runtime(s, spec, target, state_dir() / "builds" / runtime / target, log=progress)
        files = s.exec(select(ArtifactFile).where(ArtifactFile.artifact_id == art.id)).all()
        return art.name, {f.path.rsplit("/", 1)[-1]: f.sha256 for f in files}


def _push(engine: Engine, t: Transport, device_id: int, name: str) -> dict[str, str]:
    from edgelab.artifacts.devstore import open_store
    from edgelab.artifacts.push import push_blob
    from edgelab.artifacts.service import blobs_for
    from edgelab.artifacts.stamps import DbStamps

    store = open_store(t)
    stamps = DbStamps(engine, device_id)
    return {b.sha256: push_blob(store, b, stamps=stamps).remote_path for b in blobs_for(engine, [name])}


def _words(call: tuple[str, ...], wheel_dir: str, wheels: dict[str, str]) -> list[str]:
    out = []
    for w in call:
        if w.startswith("{wheel:"):
            stem = w[len("{wheel:") : -1]
            out.append(f"{wheel_dir}/{next(f for f in wheels if f.startswith(stem + '-'))}")
        else:
            out.append(w)
    return out


def _run(t: Transport, argv: list[str], what: str, progress: Progress, steps: list[dict[str, Any]]) -> str:
    progress(f"{what}: {' '.join(argv)}")
    t0 = time.monotonic()
    res = t.run(argv, timeout=STEP_TIMEOUT_S)
    secs = round(time.monotonic() - t0, 1)
    steps.append({"step": what, "argv": argv, "seconds": secs, "exit": res.exit_code})
    progress(f"{what}: exit {res.exit_code} after {secs} s")
    if not res.ok:
        tail = [ln for ln in (res.stderr or res.stdout).strip().splitlines() if not ln.startswith("[notice]")]
        tail = tail[-12:]
        errors = [ln for ln in tail if ln.startswith("ERROR")]
        raise EdgelabError(
            f"{what} failed on the device (exit {res.exit_code}): "
            + ((errors or tail)[-1] if tail else "no output"),
            remedy="the step's output ends:\n" + "\n".join(tail),
        )
    return res.stdout


def _stamp(t: Transport, path: str) -> dict[str, Any]:
    """The venv's previous stamp, or {}."""
    res = t.run(["sh", "-c", 'cat "$1" 2>/dev/null; true', "edgelab-stamp", path], timeout=30)
    try:
        data = json.loads(res.stdout) if res.stdout.strip() else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _keep_applied(now: list[dict[str, Any]], before: dict[str, Any]) -> list[dict[str, Any]]:
    """A fix-up a previous install applied stays recorded when this run finds it not needed."""
    old = {f.get("fixup"): f for f in before.get("fixups") or [] if f.get("error")}
    return [f if f.get("error") or f.get("fixup") not in old else old[f["fixup"]] for f in now]


def install(
    engine: Engine,
    device: str,
    runtime: str = "vllm-omni",
    *,
    opts: Options | None = None,
    progress: Progress | None = None,
    lease_id: str | None = None,
    pip_args: list[str] | None = None,
) -> dict[str, Any]:
    """Install ``runtime``'s pinned wheels into its venv on ``device``; returns the stamp written there.

    ``pip_args`` go to every pip call instead of the recipe's (``--find-links=DIR``: a local folder of
    wheels, for a device that cannot reach the index the recipe names).
    """
    from edgelab.lease import held

    say = progress or (lambda _line: None)
    spec = runtimes().get(runtime)
    if spec is None or spec.venv is None:
        raise NotFound(
            f"runtime {runtime!r} has no device venv recipe",
            remedy="runtimes with one: "
            + ", ".join(sorted(n for n, r in runtimes().items() if r.venv is not None)),
        )
    recipe = spec.venv
    target = install_target(engine, device, runtime)
    vt = recipe.targets[target]
    name, wheels = _wheels(engine, runtime, target, say)
    with session_scope(engine, write=False) as s:
        dev = get_device(s, device)
        endpoint, device_id = dev.endpoint(), dev.pk
    t0 = time.monotonic()
    steps: list[dict[str, Any]] = []
    with held(engine, [device], f"runtime install {runtime}", lease_id=lease_id):
        t = connect(endpoint, opts or Options())
        try:
            home = t.run(["sh", "-c", 'echo "$HOME"'], timeout=30).stdout.strip()
            venv = f"{home}/{recipe.path}"
            py = f"{venv}/bin/python"
            ts = time.monotonic()
            paths = _push(engine, t, device_id, name)
            steps.append({"step": "push wheels", "seconds": round(time.monotonic() - ts, 1), "exit": 0})
            say(f"pushed {len(paths)} wheels into the device store")
            wheel_dir = f"{venv}/{WHEELS}"
            layout(t, wheel_dir, wheels, paths)
            _run(t, [recipe.python, "-m", "venv", venv], "create the venv", say, steps)
            pip_extra = list(vt.pip_args) if pip_args is None else list(pip_args)
            for i, call in enumerate(vt.install):
                words = _words(call, wheel_dir, wheels)
                argv = [py, "-m", "pip", "install", "--no-input", *pip_extra, *words]
                _run(t, argv, f"pip install {i + 1}", say, steps)
            fixups: list[dict[str, Any]] = []
            before = _stamp(t, f"{venv}/{STAMP}")
            if vt.fixups:
                say(f"fix-ups: {', '.join(vt.fixups)}")
                res = t.run([py, "-", "fixup", *vt.fixups], input=device_script(), timeout=STEP_TIMEOUT_S)
                if not res.ok:
                    raise EdgelabError(
                        f"the fix-ups failed in {venv}: {(res.stderr or res.stdout).strip()[-300:]}",
                        remedy="see the venv; reinstall with `edgelab runtime install`",
                    )
                fixups = [json.loads(ln) for ln in res.stdout.splitlines() if ln.startswith("{")]
                for f in fixups:
                    say(f"  {f.get('fixup')}: {f.get('action')}")
                fixups = _keep_applied(fixups, before)
            extra = {
                "runtime": runtime,
                "pin": spec.pip,
                "pip_args": pip_extra,
                "target": target,
                "wheels": wheels,
                "artifact": name,
                "steps": steps,
                "fixups": fixups,
                "install_seconds": round(time.monotonic() - t0, 1),
            }
            say("checking the imports in the venv (vllm_omni takes a while)")
            res = t.run(
                [py, "-", "check", f"{venv}/{STAMP}", json.dumps(extra)],
                input=device_script(),
                timeout=STEP_TIMEOUT_S,
            )
            if not res.ok:
                raise EdgelabError(
                    f"the import check failed in {venv}: {(res.stderr or res.stdout).strip()[-300:]}",
                    remedy="see the venv; reinstall with `edgelab runtime install`",
                )
            return dict(json.loads(res.stdout.strip().splitlines()[-1]))
        finally:
            t.close()
