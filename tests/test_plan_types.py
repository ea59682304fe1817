"""A stored plan reads back typed: one ``ExecutionPlan.from_dict`` for the follower, stop, reap and bench.

The enums of the runtime spec (readiness kind, adapter, placement source) are strings as well, so
a plan's JSON is the same as before; reading it back gives the members, and a plan written by
another edgelab version (a field more, a field less) still reads.
"""

from __future__ import annotations

import json

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
