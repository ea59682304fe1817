"""The runtime file schema and its loader; every error names the file and line to fix.

name: llama.cpp
description: ...
source: {repo: URL, ref: TAG-OR-COMMIT}     # or pip: "vllm-omni==X" for pip-installed runtimes
targets:
  <target>:                                 # e.g. linux-aarch64-cuda-sm87, android-arm64
    toolchain: [cmake, ninja, g++, nvcc | android-ndk | pip | python3 | git]
    isa: x86-64-v3                          # instruction-set level the products need (edgelab.runtimes.isa)
    flags: [-DGGML_CUDA=ON, ...]            # part of the build-cache key; recorded as provenance build_flags
    steps: [[argv...], ...]                 # placeholders {src} {build} {out} {ndk} {python} {repo} {ref}
                                            # {flags} {launcher} (ccache as compiler launcher, when on PATH)
    produces: [path relative to {out}, ...]

A recipe whose steps use {src} without cloning it gets its source from edgelab.runtimes.source
(the recipe's repo@ref, or --source) and is built once per key into edgelab.runtimes.cache.
launch:
  <pipeline>: {<strategy>: [argv...]}       # placeholders {bin} {model} {port} ... filled at deploy time
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgelab.catalog.yamlsrc import CatalogError, SrcDict, load_file

RUNTIMES_DIR = Path(__file__).resolve().parents[2] / "runtimes"
TOOLS = ("cmake", "ninja", "g++", "nvcc", "android-ndk", "pip", "python3", "git", "make")
STRATEGIES = ("S1", "S3", "S4", "S5")
_TARGET = re.compile(r"^(linux|android|windows)-[a-z0-9_.-]+$")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
BUILD_PLACEHOLDERS = {"src", "build", "out", "ndk", "python", "repo", "ref", "flags", "launcher"}


class RuntimeError_(CatalogError):
    """A runtimes/*.yaml file that cannot be used; the message starts with file:line."""

    remedy = "fix the named line of the runtime file (schema: edgelab/runtimes/spec.py)"


@dataclass(frozen=True)
class TargetRecipe:
    target: str
    toolchain: tuple[str, ...]
    flags: tuple[str, ...]
    steps: tuple[tuple[str, ...], ...]
    produces: tuple[str, ...]
    where: str
    include: tuple[str, ...] = ()  # for pack steps: package paths to ship
    isa: str | None = None  # instruction-set level the products need, e.g. x86-64-v3

    @property
    def fetches_source(self) -> bool:
        """True when the steps build {src} but leave fetching it to edgelab (no clone step)."""
        uses = any("{src}" in a for step in self.steps for a in step)
        clones = any(step[:2] == ("git", "clone") for step in self.steps)
        return uses and not clones


@dataclass(frozen=True)
class RuntimeSpec:
    name: str
    description: str
    repo: str | None
    ref: str | None
    pip: str | None
    targets: dict[str, TargetRecipe]
    launch: dict[str, dict[str, tuple[str, ...]]]
    file: str
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _strs(value: Any, where: str, what: str, errors: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        errors.append(f"{where}: {what} must be a list of strings")
        return ()
    return tuple(str(v) for v in value)


def _argv(value: Any, where: str, what: str, errors: list[str], allowed: set[str] | None) -> tuple[str, ...]:
    argv = _strs(value, where, what, errors)
    if not argv and value is not None:
        errors.append(f"{where}: {what} is an empty command")
    if allowed is not None:
        for a in argv:
            for ph in _PLACEHOLDER.findall(a):
                if ph not in allowed:
                    errors.append(
                        f"{where}: {what} uses unknown placeholder {{{ph}}} (known: {', '.join(sorted(allowed))})"
                    )
    return argv


def _isa(raw: SrcDict, errors: list[str]) -> str | None:
    value = raw.get("isa")
    if value is None:
        return None
    from edgelab.runtimes.isa import LEVELS

    level = str(value).split("+")[0].lower()
    if level not in LEVELS:
        errors.append(f"{raw.where('isa')}: unknown instruction-set level {value!r} (known: {', '.join(LEVELS)})")
    return str(value)


def parse_runtime(data: Any, file: str) -> RuntimeSpec:
    errors: list[str] = []
    if not isinstance(data, SrcDict):
        raise RuntimeError_(f"{file}:1: a runtime file is a mapping (name, source, targets, launch)")
    for key in data:
        if key not in ("name", "description", "source", "targets", "launch", "notes"):
            errors.append(f"{data.where(key)}: unknown key {key!r}")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        errors.append(f"{data.where('name')}: 'name' is required")
    source = data.get("source") or SrcDict()
    repo = ref = pip = None
    if not isinstance(source, SrcDict):
        errors.append(f"{data.where('source')}: 'source' is a mapping (repo + ref, or pip)")
    else:
        repo, ref, pip = source.get("repo"), source.get("ref"), source.get("pip")
        local = source.get("local")
        if not (repo and ref) and not pip and not local:
            errors.append(f"{data.where('source')}: source needs repo and ref (pinned), pip, or local")
    targets: dict[str, TargetRecipe] = {}
    raw_targets = data.get("targets")
    if not isinstance(raw_targets, SrcDict) or not raw_targets:
        errors.append(f"{data.where('targets')}: 'targets' must map target names to recipes")
        raw_targets = SrcDict()
    for tname, raw in raw_targets.items():
        where = raw_targets.where(tname)
        if not _TARGET.match(str(tname)):
            errors.append(f"{where}: target {tname!r} is not <os>-<arch>[-accel], e.g. android-arm64")
        if not isinstance(raw, SrcDict):
            errors.append(f"{where}: the recipe for {tname} must be a mapping")
            continue
        for key in raw:
            if key not in ("toolchain", "flags", "steps", "produces", "include", "isa"):
                errors.append(f"{raw.where(key)}: unknown key {key!r}")
        tools = _strs(raw.get("toolchain"), raw.where("toolchain"), "toolchain", errors)
        for tool in tools:
            if tool not in TOOLS:
                errors.append(f"{raw.where('toolchain')}: unknown tool {tool!r} (known: {', '.join(TOOLS)})")
        steps_raw = raw.get("steps")
        steps: list[tuple[str, ...]] = []
        if not isinstance(steps_raw, list) or not steps_raw:
            errors.append(f"{raw.where('steps')}: 'steps' must be a non-empty list of commands")
        else:
            for i, step in enumerate(steps_raw):
                steps.append(_argv(step, raw.where("steps"), f"step {i + 1}", errors, BUILD_PLACEHOLDERS))
        produces = _strs(raw.get("produces"), raw.where("produces"), "produces", errors)
        if not produces:
            errors.append(
                f"{raw.where('produces')}: 'produces' must list the files the build leaves in {{out}}"
            )
        targets[str(tname)] = TargetRecipe(
            str(tname),
            tools,
            _strs(raw.get("flags"), raw.where("flags"), "flags", errors),
            tuple(steps),
            produces,
            where,
            _strs(raw.get("include"), raw.where("include"), "include", errors),
            _isa(raw, errors),
        )
    launch: dict[str, dict[str, tuple[str, ...]]] = {}
    raw_launch = data.get("launch") or SrcDict()
    if not isinstance(raw_launch, SrcDict):
        errors.append(f"{data.where('launch')}: 'launch' maps pipelines to strategies to commands")
        raw_launch = SrcDict()
    for pipe, strategies in raw_launch.items():
        if not isinstance(strategies, SrcDict):
            errors.append(
                f"{raw_launch.where(pipe)}: launch.{pipe} maps strategies (S1, S3, S4, S5) to commands"
            )
            continue
        launch[str(pipe)] = {}
        for strat, argv in strategies.items():
            if strat not in STRATEGIES:
                errors.append(f"{strategies.where(strat)}: unknown strategy {strat!r} (S2 is never launched)")
            launch[str(pipe)][str(strat)] = _argv(
                argv, strategies.where(strat), f"launch {pipe} {strat}", errors, None
            )
    if errors:
        raise RuntimeError_("\n".join(errors))
    return RuntimeSpec(
        name=str(name),
        description=str(data.get("description") or ""),
        repo=repo,
        ref=None if ref is None else str(ref),
        pip=pip,
        targets=targets,
        launch=launch,
        file=file,
        notes=str(data.get("notes") or ""),
        extra={"local": source.get("local")} if isinstance(source, SrcDict) and source.get("local") else {},
    )


def load_runtimes(path: Path | str | None = None) -> dict[str, RuntimeSpec]:
    """Every runtimes/*.yaml, by name; a duplicate name is an error naming both files."""
    folder = Path(path) if path else RUNTIMES_DIR
    out: dict[str, RuntimeSpec] = {}
    for f in sorted(folder.glob("*.yaml")):
        spec = parse_runtime(load_file(f), str(f))
        if spec.name in out:
            raise RuntimeError_(f"{f}:1: runtime {spec.name!r} is also defined in {out[spec.name].file}")
        out[spec.name] = spec
    return out


def load_runtime(name: str, path: Path | str | None = None) -> RuntimeSpec:
    specs = load_runtimes(path)
    if name not in specs:
        from edgelab.errors import NotFound

        raise NotFound(f"no runtime {name!r}", remedy=f"known: {', '.join(sorted(specs)) or '(none)'}")
    return specs[name]
