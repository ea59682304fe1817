"""A stored plan reads back typed: one ``ExecutionPlan.from_dict`` for the follower, stop, reap and bench.

The enums of the runtime spec (readiness kind, adapter, placement source) are strings as well, so
a plan's JSON is the same as before; reading it back gives the members, and a plan written by
another edgelab version (a field more, a field less) still reads. Its artifacts read back as
``ArtifactNeed`` / ``ResolvedArtifact`` values and write the same dicts (keys, values, order).
"""

from __future__ import annotations

import json
from typing import Any

from edgelab.deploy.artifact_need import ArtifactNeed, ResolvedArtifact
from edgelab.deploy.plan import ExecutionPlan, ProcessSpec, StagePlan
from edgelab.runtimes.spec import (
    ADAPTERS,
    PLACEMENT_EVIDENCE,
    READY_KINDS,
    Adapter,
    PlacementSource,
    ReadyKind,
)


def _plan() -> ExecutionPlan:
    return ExecutionPlan(
        pipeline="qwen3-tts",
        device="s25",
        strategy="S3",
        runtime="llama.cpp",
        reason="test",
        stages=[StagePlan("talker", "talker", "llama.cpp", "cpu", "cpu")],
        processes=[
            ProcessSpec(
                "server",
                ["{bin}/llama-server"],
                adapter=Adapter.LLAMA_SERVER,
                placement=PlacementSource.LLAMA_LOAD_LOG,
                ready={"kind": ReadyKind.HTTP, "path": "/health", "port": 8080},
                port=8080,
            )
        ],
        memory={"ram": 1},
    )


def test_the_json_is_plain_strings_and_reads_back_typed() -> None:
    p = _plan()
    text = json.dumps(p.to_dict())
    assert '"adapter": "llama-server"' in text and '"kind": "http"' in text
    back = ExecutionPlan.from_dict(json.loads(text))
    (proc,) = back.processes
    assert proc.adapter is Adapter.LLAMA_SERVER and proc.placement is PlacementSource.LLAMA_LOAD_LOG
    assert proc.ready_kind is ReadyKind.HTTP and back.stages[0].name == "talker"
    assert back.to_dict() == p.to_dict()


def test_a_plan_from_another_version_still_reads() -> None:
    d = _plan().to_dict()
    d["from_the_future"] = 1
    d["processes"][0]["also_new"] = True
    del d["memory"], d["notes"]
    back = ExecutionPlan.from_dict(d)
    assert back.memory == {} and back.notes == [] and back.processes[0].name == "server"
    assert ExecutionPlan.from_dict(None).processes == []


def test_readiness_defaults_and_the_spec_tuples_are_the_enums() -> None:
    assert ProcessSpec("p", [], ready_pattern="up").ready_kind is ReadyKind.LOG
    assert ProcessSpec("p", []).ready_kind is ReadyKind.ALIVE
    assert ProcessSpec("p", [], ready={"kind": "bogus"}).ready_kind is ReadyKind.ALIVE
    assert set(READY_KINDS) == set(ReadyKind) and set(ADAPTERS) == set(Adapter)
    assert set(PLACEMENT_EVIDENCE) == set(PlacementSource)


# a plan's artifacts as main has stored them since before they were typed: a stage's role, a runtime
# build with its files, a model file bound to {model}, an optional zipapp that was not found
OLD_ARTIFACTS: list[dict[str, Any]] = [
    {"role": "talker.q4_k_m.gguf", "stage": "talker", "present": False},
    {
        "role": "runtime.llama.cpp",
        "stage": None,
        "process": "server",
        "kind": "runtime",
        "runtime": "llama.cpp",
        "target": "linux-aarch64",
        "optional": False,
        "programs": ["llama-server"],
        "present": True,
        "name": "llama-linux-aarch64",
        "digest": "d" * 64,
        "files": {"llama-server": "a" * 64},
        "names": ["llama-linux-aarch64"],
        "isa": "armv8.2-a",
        "source_commit": "abc",
        "build_key": "k1",
    },
    {
        "role": "talker.model",
        "stage": "talker",
        "process": "server",
        "placeholder": "model",
        "kind": "model",
        "ext": ".gguf",
        "want_role": None,
        "pipeline": "qwen3-tts-0.6b",
        "pipeline_kind": "tts",
        "target": "any",
        "optional": False,
        "present": True,
        "name": "qwen3-tts-0.6b-q4",
        "digest": "e" * 64,
        "sha256": "f" * 64,
        "weights": "random",
        "file": "m.gguf",
        "bytes": 123,
        "shape": {"n_layer": 2, "n_head_kv": 2, "head_dim": 64},
    },
    {
        "role": "runtime.reference:.pyz",
        "stage": None,
        "process": "server",
        "placeholder": "pyz",
        "kind": "runtime",
        "runtime": "reference",
        "target": "linux-aarch64",
        "ext": ".pyz",
        "optional": True,
        "programs": [],
        "present": False,
    },
]


def test_stored_artifacts_read_back_typed_and_write_the_same_json() -> None:
    d = _plan().to_dict()
    d["artifacts"] = OLD_ARTIFACTS
    back = ExecutionPlan.from_dict(json.loads(json.dumps(d)))
    stage, build, model, pyz = back.artifacts
    assert type(stage) is ResolvedArtifact and not stage.present and stage.process is None
    assert isinstance(build, ResolvedArtifact) and build.build and build.present
    assert build.files == {"llama-server": "a" * 64} and build.isa == "armv8.2-a"
    assert isinstance(model, ResolvedArtifact) and not model.build and model.placeholder == "model"
    assert (model.sha256, model.bytes, model.shape) == ("f" * 64, 123, OLD_ARTIFACTS[2]["shape"])
    assert not pyz.present and pyz.optional and not pyz.build
    assert back.present_artifacts() == [build, model]
    # the same keys, values and order as stored
    assert json.dumps(back.to_dict()["artifacts"]) == json.dumps(OLD_ARTIFACTS)
    assert ExecutionPlan.from_dict(back.to_dict()).to_dict() == back.to_dict()


def test_an_old_shape_artifact_with_keys_missing_or_unknown_still_reads() -> None:
    d = _plan().to_dict()
    d["artifacts"] = [
        {"role": "lm.model", "kind": "model", "present": True, "name": "m", "from_the_future": 1},
        {"stage": "lm"},  # no role, never looked up
    ]
    back = ExecutionPlan.from_dict(d)
    found, need = back.artifacts
    assert isinstance(found, ResolvedArtifact) and found.present and found.name == "m"
    assert type(need) is ArtifactNeed and not need.present and need.role == "" and need.stage == "lm"
    again = back.to_dict()
    assert again["artifacts"] == [
        {"role": "lm.model", "stage": None, "kind": "model", "present": True, "name": "m"},
        {"role": "", "stage": "lm"},
    ]
    assert ExecutionPlan.from_dict(again).to_dict() == again


def test_a_need_before_resolution_is_written_as_planned() -> None:
    build = ArtifactNeed(
        role="runtime.llama.cpp",
        process="server",
        kind="runtime",
        runtime="llama.cpp",
        target="t",
        optional=False,
    )
    assert list(build.to_dict()) == ["role", "stage", "process", "kind", "runtime", "target", "optional"]
    file = ArtifactNeed(
        role="lm.model",
        stage="lm",
        process="server",
        placeholder="model",
        kind="model",
        pipeline="p",
        target="any",
    )
    assert file.to_dict() == {
        "role": "lm.model",
        "stage": "lm",
        "process": "server",
        "placeholder": "model",
        "kind": "model",
        "ext": None,
        "want_role": None,
        "pipeline": "p",
        "target": "any",
    }
    found = file.resolved(present=True, name="m", target="linux-x86_64")
    assert (found.target, file.target, found.role) == ("linux-x86_64", "any", "lm.model")  # a new value
    assert found.resolved(present=False).name == "m" and not file.present
