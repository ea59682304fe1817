"""Render a runtime's launch template (``launch:`` in runtimes/*.yaml) into a concrete command.

A template is data: argv words with ``{placeholders}``, optional groups (dropped when one of their
placeholders has no value), environment, library path, readiness, the adapter that reads the
output and where placement evidence comes from. Rendering is pure: the strategy gives the values
it knows at plan time; two kinds of value are bound later, on the device, and stay as tokens:

- ``{bin}``: the process's run directory of links into the device's content store, named as the
  build produced the files (``bin/llama-server -> ~/.edgelab/store/<sha256>``);
- ``{art:NAME}``: a placeholder bound to an artifact (``artifacts:`` in the template); planning
  replaces it with ``{blob:<sha256>}`` once the registry has the artifact, and the launch with
  the blob's store path after the push.

A missing required value is an error naming the template's file:line, never a half-filled argv.
"""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass, field
from functools import cache

from edgelab.errors import TemplateError
from edgelab.runtimes.spec import LaunchTemplate, RuntimeSpec, load_runtimes

_PH = re.compile(r"\{([a-z_]+)\}")
BIN = "{bin}"
ART = "{art:%s}"
_ART = re.compile(r"\{art:([a-z_]+)\}")


@dataclass
class Rendered:
    """One launch, rendered: what a plan's process carries."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    library_path: list[str] = field(default_factory=list)
    ready: dict[str, object] = field(default_factory=dict)  # kind, pattern, path, port
    port: int | None = None
    serves: str | None = None
    values: dict[str, str] = field(default_factory=dict)  # what was filled in (provenance)


@cache
def runtimes() -> dict[str, RuntimeSpec]:
    """The runtime catalog, loaded once per process (the files do not change under a running CLI)."""
    return load_runtimes()


def host_target() -> str:
    """The lab host's own target: what a virtual device runs (its commands are lab-host processes)."""
    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"linux-{arch}"


def find(spec: RuntimeSpec, pipeline_id: str, kind: str, strategy: str) -> LaunchTemplate | None:
    """The template for a pipeline (by id first, then by kind) under one strategy; None when none."""
    for key in (pipeline_id, kind):
        tpl = spec.launch.get(key, {}).get(strategy)
        if tpl is not None:
            return tpl
    return None


def pick_target(tpl: LaunchTemplate, targets: list[str]) -> str | None:
    """The first of the device's targets (most specific first) that the template is written for."""
    return next((t for t in targets if t in tpl.targets), None)


def _fill(word: str, values: dict[str, str], tpl: LaunchTemplate) -> str | None:
    """The word with its placeholders filled; None when one has no value."""
    missing = False

    def sub(m: re.Match[str]) -> str:
        nonlocal missing
        name = m.group(1)
        if name == "bin":
            return BIN
        if name in tpl.artifacts:
            return ART % name
        v = values.get(name)
        if v is None:
            missing = True
            return ""
        return v

    out = _PH.sub(sub, word)
    return None if missing else out


def render(tpl: LaunchTemplate, values: dict[str, object | None]) -> Rendered:
    """Fill ``tpl`` with ``values`` (None = no value); raises TemplateError for a missing required one."""
    have = {k: str(v) for k, v in tpl.defaults.items()}
    if tpl.port is not None:
        have.setdefault("port", str(tpl.port))
    have.update({k: str(v) for k, v in values.items() if v is not None})
    argv: list[str] = []
    for arg in tpl.argv:
        if isinstance(arg, tuple):
            group = [_fill(w, have, tpl) for w in arg]
            if all(g is not None for g in group):
                argv.extend(g for g in group if g is not None)
            continue
        got = _fill(arg, have, tpl)
        if got is None:
            names = [n for n in _PH.findall(arg) if n not in have and n != "bin" and n not in tpl.artifacts]
            raise TemplateError(
                f"{tpl.where}: launch {tpl.ref} needs a value for {{{names[0]}}}",
                remedy=f"give {names[0]} (or a default under defaults:) for this template",
            )
        argv.append(got)
    env = {k: v for k, raw in tpl.env.items() if (v := _fill(raw, have, tpl)) is not None}
    libs = [v for raw in tpl.library_path if (v := _fill(raw, have, tpl)) is not None]
    ready: dict[str, object] = {"kind": tpl.ready.kind}
    if tpl.ready.pattern:
        ready["pattern"] = tpl.ready.pattern
    if tpl.ready.path:
        ready["path"] = tpl.ready.path
    if tpl.ready.port:
        port_s = _fill(tpl.ready.port, have, tpl)
        if port_s is None or not port_s.isdigit():
            raise TemplateError(
                f"{tpl.where}: launch {tpl.ref} readiness needs a port, got {tpl.ready.port!r}"
            )
        ready["port"] = int(port_s)
    port = int(have["port"]) if have.get("port", "").isdigit() else None
    serves = _fill(tpl.serves, have, tpl) if tpl.serves else None
    used = {n for w in tpl.words() for n in _PH.findall(w)} | {
        n for v in tpl.env.values() for n in _PH.findall(v)
    }
    return Rendered(
        argv=argv,
        env=env,
        library_path=libs,
        ready=ready,
        port=port,
        serves=serves,
        values={k: v for k, v in have.items() if k in used},
    )


def artifact_tokens(words: list[str]) -> set[str]:
    """The artifact placeholders (``{art:NAME}``) left in rendered words."""
    return {m for w in words for m in _ART.findall(w)}


def bind_artifacts(words: list[str], blobs: dict[str, str]) -> list[str]:
    """Replace ``{art:NAME}`` with ``{blob:SHA}`` for each bound artifact placeholder."""
    out = []
    for w in words:
        for name, sha in blobs.items():
            w = w.replace(ART % name, "{blob:" + sha + "}")
        out.append(w)
    return out


__all__ = [
    "BIN",
    "Rendered",
    "TemplateError",
    "artifact_tokens",
    "bind_artifacts",
    "find",
    "host_target",
    "pick_target",
    "render",
    "runtimes",
]
