"""Playbook files (``playbooks/*.yaml``): load, validate, substitute variables.

Validation errors name ``file:line`` and the offending key, all problems at once (the first one
is the headline), via the line-keeping YAML loader of the catalog. A playbook is data: nothing
in it is evaluated; gates are parsed by edgelab.playbook.gates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgelab.catalog.schema import Field, check
from edgelab.catalog.yamlsrc import SrcDict, SrcList, load_file, load_text
from edgelab.errors import CatalogError, ConfigError, PlaybookError
from edgelab.playbook.gates import Gate, parse_gate

STEP_KINDS = ("probe", "push", "deploy", "bench", "gate", "soak", "collect", "stop")
BUILTIN_VARS = ("device", "device_class", "pipeline", "playbook")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

TOP_SPEC = {
    "name": Field(str, required=True),
    "description": Field(str),
    "devices": Field(list, required=True, items=str),
    "pipelines": Field(list, items=str),
    "vars": Field(dict),
    "parallel": Field(int, minimum=1),
    "matrix": Field(dict),
    "steps": Field(list, required=True, items=dict),
    "cleanup": Field(list, items=dict),
}
MATRIX_SPEC = {"update": Field(bool), "qualify": Field(bool)}
COMMON_SPEC = {
    "name": Field(str),
    "id": Field(str),
    "timeout": Field((int, float, str), minimum=0),
    "continue_on_error": Field(bool),
}
OPTION_SPECS: dict[str, dict[str, Field]] = {
    "probe": {},
    "push": {"artifact": Field(str, required=True), "verify": Field(bool)},
    "deploy": {"pipeline": Field(str), "strategy": Field(str), "runtime": Field(str)},
    "bench": {  # edgelab.bench's single_request_batch1_v1 (BenchRequest); VLA: requests = control ticks
        "workload": Field(str, choices=("tts", "vla")),
        "pipeline": Field(str),
        "runtime": Field(str),
        "strategy": Field(str),
        "requests": Field((int, str), minimum=1),
        "warmup": Field((int, str), minimum=0),
        "band": Field(str),
        "frames": Field((int, str), minimum=1),
        "frames_per_s": Field((float, str), minimum=0),
        "control_hz": Field((float, str), minimum=0.001),
        "slow_every": Field((int, str), minimum=0),
        "slow_ms": Field((float, str), minimum=0),
        "endpoint": Field(str),  # a server edgelab did not launch (ws://, http://): measured, not launched
        "endpoint_options": Field(dict),
    },
    "gate": {
        "checks": Field(list, required=True, items=str),
        "run": Field(str),
        "baseline": Field(str),  # relative gates: the baseline NAME of the run's device and pipeline
        "confidence": Field((float, str)),  # verdict gates: the comparison's confidence (default 0.99)
        "missing_baseline": Field(str, choices=("pass", "fail")),  # none set yet: not judged, or failed
    },
    "soak": {"minutes": Field((float, str), required=True), "interval_s": Field((float, str), minimum=0.1)},
    "collect": {"files": Field(list, items=str), "logs": Field(bool)},
    "stop": {},
}


@dataclass
class Step:
    kind: str
    name: str
    options: dict[str, Any]
    timeout_s: float | None = None
    continue_on_error: bool = False
    id: str | None = None
    where: str = "?"
    gates: list[Gate] = field(default_factory=list)


@dataclass
class Playbook:
    name: str
    file: str
    devices: list[str]
    steps: list[Step]
    cleanup: list[Step] = field(default_factory=list)
    pipelines: list[str] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    parallel: int = 8
    matrix_update: bool = False
    matrix_qualify: bool = False


def parse_duration(value: Any, where: str, key: str, errors: list[str]) -> float | None:
    """Seconds from ``90``, ``"90s"``, ``"500ms"``, ``"5m"``; errors name the line."""
    if isinstance(value, bool):
        errors.append(f"{where}: {key} must be a duration, got {value!r}")
        return None
    if isinstance(value, int | float):
        return float(value)
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(ms|s|m|min|h)?\s*", str(value))
    if not m:
        errors.append(f"{where}: {key} must be a duration like 90, '90s', '5m', got {value!r}")
        return None
    scale = {"ms": 0.001, "s": 1, None: 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    return float(m.group(1)) * scale


def _step(raw: Any, where: str, known_vars: set[str], errors: list[str], index: int) -> Step | None:
    if not isinstance(raw, dict):
        errors.append(f"{where}: a step must be a mapping with one of {', '.join(STEP_KINDS)}")
        return None
    kinds = [k for k in raw if k in STEP_KINDS]
    loc = raw.where if isinstance(raw, SrcDict) else (lambda key=None: where)
    if len(kinds) != 1:
        unknown = [k for k in raw if k not in STEP_KINDS and k not in COMMON_SPEC]
        if unknown:
            errors.append(
                f"{loc(unknown[0])}: unknown step kind {unknown[0]!r} (known: {', '.join(STEP_KINDS)})"
            )
        else:
            errors.append(
                f"{loc()}: a step needs exactly one of {', '.join(STEP_KINDS)}, got {kinds or 'none'}"
            )
        return None
    kind = kinds[0]
    common = SrcDict({k: v for k, v in raw.items() if k != kind})
    common.file, common.line = getattr(raw, "file", "?"), getattr(raw, "line", 0)
    common.key_lines = {k: v for k, v in getattr(raw, "key_lines", {}).items() if k != kind}
    ok = check(common, COMMON_SPEC, f"{kind} step", loc(), errors)
    opts = raw[kind]
    if kind == "gate" and isinstance(opts, list):  # shorthand: gate: [expr, ...]
        wrapped = SrcDict(checks=opts)
        wrapped.file, wrapped.line = getattr(opts, "file", "?"), getattr(opts, "line", 0)
        wrapped.key_lines = {"checks": wrapped.line}
        opts = wrapped
    if opts is None:
        opts = {}
    ok = check(opts, OPTION_SPECS[kind], f"{kind} options", loc(kind), errors) and ok
    if not ok:
        return None
    gates: list[Gate] = []
    if kind == "gate":
        checks = opts["checks"]
        for i, text in enumerate(checks):
            try:
                gates.append(parse_gate(text))
            except ConfigError as err:
                at = checks.where(i) if isinstance(checks, SrcList) else loc(kind)
                errors.append(f"{at}: {err}")
    for key, value in opts.items():
        for var in _VAR.findall(str(value)):
            if var not in known_vars:
                at = opts.where(key) if isinstance(opts, SrcDict) else loc(kind)
                errors.append(f"{at}: unknown variable ${{{var}}} in {key!r} (define it under vars:)")
    timeout = None
    if "timeout" in raw:
        timeout = parse_duration(raw["timeout"], loc("timeout"), "timeout", errors)
    if kind == "soak":
        parse_duration(_minutes_probe(opts["minutes"]), loc(kind), "minutes", errors)
    default_name = (
        kind if kind != "bench" else f"bench {opts.get('workload') or opts.get('pipeline') or ''}".strip()
    )
    return Step(
        kind=kind,
        name=str(raw.get("name") or default_name),
        options=dict(opts),
        timeout_s=timeout,
        continue_on_error=bool(raw.get("continue_on_error", False)),
        id=raw.get("id"),
        where=loc(),
        gates=gates,
    )


def _minutes_probe(value: Any) -> Any:
    return value if not isinstance(value, str) or "$" not in value else 0


def parse_playbook(data: Any, file: str) -> Playbook:
    errors: list[str] = []
    if not isinstance(data, dict):
        raise PlaybookError(f"{file}:1: a playbook is a mapping with name, devices and steps")
    check(data, TOP_SPEC, "playbook", f"{file}:1", errors)
    variables = dict(data.get("vars") or {}) if isinstance(data.get("vars"), dict) else {}
    known = set(variables) | set(BUILTIN_VARS)
    matrix = data.get("matrix") or {}
    if isinstance(matrix, dict):
        check(
            matrix, MATRIX_SPEC, "matrix", data.where("matrix") if isinstance(data, SrcDict) else file, errors
        )
    steps: list[Step] = []
    cleanup: list[Step] = []
    for section, out in (("steps", steps), ("cleanup", cleanup)):
        items = data.get(section)
        if not isinstance(items, list):
            continue
        if section == "steps" and not items:
            errors.append(f"{data.where(section)}: a playbook needs at least one step")
        for i, raw in enumerate(items):
            at = items.where(i) if isinstance(items, SrcList) else f"{file}:1"
            step = _step(raw, at, known, errors, i)
            if step is not None:
                out.append(step)
    ids = [s.id for s in steps if s.id]
    for s in steps:
        ref = s.options.get("run") if s.kind == "gate" else None
        if ref and ref not in ids:
            errors.append(f"{s.where}: gate refers to run {ref!r}, but no step has that id")
    if errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        err = PlaybookError(errors[0] + more)
        err.problems = errors  # type: ignore[attr-defined]
        raise err
    return Playbook(
        name=data["name"],
        file=file,
        devices=list(data["devices"]),
        steps=steps,
        cleanup=cleanup,
        pipelines=list(data.get("pipelines") or []),
        vars=variables,
        description=str(data.get("description", "")),
        parallel=int(data.get("parallel", 8)),
        matrix_update=bool(matrix.get("update", False)),
        matrix_qualify=bool(matrix.get("qualify", False)),
    )


def load_playbook(path: Path | str) -> Playbook:
    """Read and validate a playbook file; PlaybookError (file:line first) when it is invalid."""
    path = Path(path)
    try:
        data = load_file(path)
    except CatalogError as err:
        raise PlaybookError(str(err)) from None
    return parse_playbook(data, str(path))


def loads_playbook(text: str, file: str = "<playbook>") -> Playbook:
    try:
        data = load_text(text, file)
    except CatalogError as err:
        raise PlaybookError(str(err)) from None
    return parse_playbook(data, file)


def substitute(value: Any, variables: dict[str, Any]) -> Any:
    """``${name}`` replaced in strings (a whole-string reference keeps the variable's type)."""
    if isinstance(value, str):
        whole = _VAR.fullmatch(value)
        if whole:
            return variables.get(whole.group(1), value)
        return _VAR.sub(lambda m: str(variables.get(m.group(1), m.group(0))), value)
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, variables) for k, v in value.items()}
    return value


def check_values(pb: Playbook, overrides: dict[str, Any] | None = None) -> None:
    """Every step's options with the variables put in (the file's ``vars:``, then ``--var``) checked
    against their spec again: ``requests: ${n}`` with ``n: -3`` is refused here, by ``--dry-run``
    too, not when the step runs. Raises PlaybookError naming each file:line."""
    variables = {**pb.vars, **(overrides or {})}
    errors: list[str] = []
    for step in [*pb.steps, *pb.cleanup]:
        opts = substitute(step.options, variables)
        if opts == step.options or not isinstance(opts, dict):
            continue  # no variable in them: checked when the file was read
        numbers = {k: _number(v) for k, v in opts.items() if k in OPTION_SPECS.get(step.kind, {})}
        check(
            {k: v for k, v in numbers.items() if v is not None},
            {k: f for k, f in OPTION_SPECS[step.kind].items() if k in numbers and numbers[k] is not None},
            f"{step.kind} options (variables put in)",
            step.where,
            errors,
        )
    if errors:
        raise PlaybookError("\n".join(errors), remedy="fix the value (or the variable, or --var)")


def _number(value: Any) -> Any:
    """A number from a substituted option (``"-3"`` is -3); None when it is no number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                return None
    return None


def parse_var_overrides(pairs: list[str]) -> dict[str, Any]:
    """``--var k=v`` pairs; values are YAML scalars (``3`` is a number, ``true`` a boolean)."""
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ConfigError(f"--var {pair!r}: expected NAME=VALUE", remedy="e.g. --var requests=3")
        try:
            out[key] = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            out[key] = value
    return out
