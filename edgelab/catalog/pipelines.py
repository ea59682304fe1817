"""Pipeline specs (``edgelab/catalog/pipelines/*.yaml``): stages, model sizes and the memory model.

A spec is data, not code: the numbers (parameters, layers, KV heads, head dim) are copied from the
published model cards and configs, cited in each file, so weights and KV bytes can be computed for
any quantization without downloading a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgelab.catalog.schema import Field, check, raise_if
from edgelab.catalog.yamlsrc import SrcDict, load_file
from edgelab.errors import CatalogError

PIPELINE_DIR = Path(__file__).with_name("pipelines")

KINDS = ("tts", "omni", "vla", "text_lm")
METRICS = ("audio", "action", "text")

# Bytes per parameter of each weight format: q8_0 stores 32 int8 + one fp16 scale (34 B / 32 weights),
# q4 is q4_0 (16 B of nibbles + one fp16 scale per 32 weights = 18 B / 32); llama.cpp's ggml-quants.
BYTES_PER_PARAM = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "q8_0": 34 / 32, "q4": 18 / 32}

_MODEL_SPEC = {
    "parameters": Field(float, required=True, minimum=0),
    "layers": Field(int, minimum=0),
    "kv_heads": Field(int, minimum=0),
    "head_dim": Field(int, minimum=0),
    "dtype_bytes": Field(int, minimum=1),  # bytes per KV element (2 for bf16/fp16 caches)
    "kv_cache": Field(bool),  # False: state reset per step (code predictor), no long-lived KV
    "quantizable": Field(bool),  # False: stays 16-bit in every quantization (codec decoders, vision towers)
}
_STAGE_SPEC = {
    "name": Field(str, required=True),
    "role": Field(str, required=True),
    "modality": Field(dict, required=True),
    "model": Field(dict),
    "notes": Field(str),
}
_PIPELINE_SPEC = {
    "id": Field(str, required=True),
    "aliases": Field(
        list, items=str
    ),  # short names an operator types (``qwen3-tts``): every command accepts them
    "name": Field(str, required=True),
    "kind": Field(str, required=True, choices=KINDS),
    "metrics": Field(list, required=True, items=str),
    "sources": Field(list, required=True, items=str),
    "stages": Field(list, required=True, items=dict),
    "min_context_tokens": Field(int, minimum=1),
    "vllm_omni": Field(bool),
    "device_stages_s4": Field(list, items=str),
    "audio": Field(dict),
    "chunk_schedule": Field(dict),
    "action": Field(dict),
    "provisional": Field(bool),
    "notes": Field(str),
}


@dataclass
class ModelParams:
    parameters: float
    layers: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    dtype_bytes: int = 2
    kv_cache: bool = True
    quantizable: bool = True

    def weight_bytes(self, quant: str) -> int:
        q = quant if self.quantizable else ("fp32" if quant == "fp32" else "bf16")
        return int(self.parameters * BYTES_PER_PARAM[q])

    def kv_bytes_per_token(self) -> int:
        """2 (K and V) x layers x kv_heads x head_dim x dtype bytes; 0 without a long-lived cache."""
        if not self.kv_cache:
            return 0
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes


@dataclass
class StageSpec:
    name: str
    role: str
    inputs: list[str]
    outputs: list[str]
    model: ModelParams | None = None


@dataclass
class PipelineSpec:
    id: str
    name: str
    kind: str
    metrics: list[str]
    sources: list[str]
    stages: list[StageSpec]
    min_context_tokens: int = 2048
    vllm_omni: bool = False
    device_stages_s4: list[str] = field(default_factory=list)
    audio: dict[str, Any] = field(default_factory=dict)
    chunk_schedule: dict[str, Any] = field(default_factory=dict)
    action: dict[str, Any] = field(default_factory=dict)
    provisional: bool = False
    notes: str = ""
    source: str = "?"
    aliases: list[str] = field(default_factory=list)

    def weight_bytes(self, quant: str, stages: list[str] | None = None) -> int:
        return sum(
            s.model.weight_bytes(quant)
            for s in self.stages
            if s.model and (stages is None or s.name in stages)
        )

    def kv_bytes_per_token(self) -> int:
        return sum(s.model.kv_bytes_per_token() for s in self.stages if s.model)

    @property
    def edge_ramp(self) -> list[int]:
        return list(self.chunk_schedule.get("edge_ramp", []))


def _stage(raw: Any, errors: list[str], where: str) -> StageSpec | None:
    if not check(raw, _STAGE_SPEC, "stage", where, errors):
        return None
    loc = raw.where if isinstance(raw, SrcDict) else (lambda k=None: where)
    mod = raw["modality"]
    ok = check(
        mod,
        {"in": Field(list, required=True, items=str), "out": Field(list, required=True, items=str)},
        "modality",
        loc("modality"),
        errors,
    )
    model = None
    if "model" in raw:
        m = raw["model"]
        if check(m, _MODEL_SPEC, "model", loc("model"), errors):
            model = ModelParams(
                parameters=float(m["parameters"]),
                layers=m.get("layers", 0),
                kv_heads=m.get("kv_heads", 0),
                head_dim=m.get("head_dim", 0),
                dtype_bytes=m.get("dtype_bytes", 2),
                kv_cache=m.get("kv_cache", bool(m.get("layers"))),
                quantizable=m.get("quantizable", True),
            )
            if model.kv_cache and not (model.layers and model.kv_heads and model.head_dim):
                errors.append(f"{loc('model')}: a stage with a KV cache needs layers, kv_heads and head_dim")
                ok = False
        else:
            ok = False
    if not ok:
        return None
    return StageSpec(raw["name"], raw["role"], list(mod["in"]), list(mod["out"]), model)


def parse_pipeline(data: Any, file: str) -> PipelineSpec:
    errors: list[str] = []
    where = data.where() if isinstance(data, SrcDict) else f"{file}:1"
    if not check(data, _PIPELINE_SPEC, "pipeline spec", where, errors):
        raise_if(errors)
    for i, m in enumerate(data["metrics"]):
        if m not in METRICS:
            errors.append(f"{data['metrics'].where(i)}: metric {m!r}; expected one of {', '.join(METRICS)}")
    stages = []
    for i, s in enumerate(data["stages"]):
        st = _stage(s, errors, data["stages"].where(i))
        if st:
            stages.append(st)
    names = [s.name for s in stages]
    for n in data.get("device_stages_s4", []):
        if n not in names:
            errors.append(f"{data.where('device_stages_s4')}: device_stages_s4 names unknown stage {n!r}")
    sched = data.get("chunk_schedule", {})
    if sched:
        ok = check(
            sched,
            {"server": Field(dict), "edge_ramp": Field(list, items=int)},
            "chunk_schedule",
            data.where("chunk_schedule"),
            errors,
        )
        ramp = sched.get("edge_ramp", []) if ok else []
        if ramp and any(b <= a for a, b in zip(ramp, ramp[1:], strict=False)):
            errors.append(f"{sched.where('edge_ramp')}: edge_ramp must increase, got {list(ramp)}")
    if not any(s.model for s in stages) and not errors:
        errors.append(f"{where}: pipeline {data['id']!r} has no stage with a model: nothing to size")
    raise_if(errors)
    return PipelineSpec(
        id=data["id"],
        name=data["name"],
        kind=data["kind"],
        metrics=list(data["metrics"]),
        sources=list(data["sources"]),
        stages=stages,
        min_context_tokens=data.get("min_context_tokens", 2048),
        vllm_omni=data.get("vllm_omni", False),
        device_stages_s4=list(data.get("device_stages_s4", [])),
        audio=dict(data.get("audio", {})),
        chunk_schedule=_plain(sched),
        action=_plain(data.get("action", {})),
        provisional=data.get("provisional", False),
        notes=str(data.get("notes", "")).strip(),
        source=where,
        aliases=list(data.get("aliases", [])),
    )


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return x


def load_pipelines(path: Path | str | None = None) -> dict[str, PipelineSpec]:
    """Every spec in the directory, by id; raises :class:`CatalogError` naming file:line."""
    root = Path(path) if path else PIPELINE_DIR
    files = sorted(root.glob("*.yaml")) if root.is_dir() else [root]
    out: dict[str, PipelineSpec] = {}
    for f in files:
        spec = parse_pipeline(load_file(f), str(f))
        if spec.id in out:
            raise CatalogError(
                f"{spec.source}: duplicate pipeline id {spec.id!r} (first at {out[spec.id].source})"
            )
        out[spec.id] = spec
    owners: dict[str, str] = {}
    for spec in out.values():
        for alias in spec.aliases:
            if alias in out or alias in owners:
                first = out[alias].source if alias in out else out[owners[alias]].source
                raise CatalogError(
                    f"{spec.source}: alias {alias!r} is already a pipeline id or alias (at {first})"
                )
            owners[alias] = spec.id
    return out


def pipeline_aliases(specs: dict[str, PipelineSpec] | None = None) -> dict[str, str]:
    """Alias -> pipeline id, from the specs' ``aliases:`` lists."""
    specs = load_pipelines() if specs is None else specs
    return {alias: spec.id for spec in specs.values() for alias in spec.aliases}


def resolve_pipeline_id(name: str, specs: dict[str, PipelineSpec] | None = None) -> str:
    """The pipeline id that ``name`` (an id or an alias) stands for; unknown names raise, listing the choices."""
    specs = load_pipelines() if specs is None else specs
    if name in specs:
        return name
    aliases = pipeline_aliases(specs)
    if name in aliases:
        return aliases[name]
    choices = ", ".join(sorted(specs)) + (
        f" (aliases: {', '.join(f'{a} = {i}' for a, i in sorted(aliases.items()))})" if aliases else ""
    )
    raise CatalogError(f"unknown pipeline {name!r}", remedy=f"choose one of: {choices}")


def load_pipeline(pipeline_id: str, path: Path | str | None = None) -> PipelineSpec:
    """The spec of a pipeline id or alias."""
    specs = load_pipelines(path)
    return specs[resolve_pipeline_id(pipeline_id, specs)]
