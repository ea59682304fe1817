# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""A plan's artifacts, typed: resolution returns a new plan (the one it was given stays as it was),
and every plan of the virtual lab reads back from its stored JSON to the same values and the same
JSON (keys, values, order), with nothing registered and with builds, zipapps and models registered."""

from __future__ import annotations

import json

from deploy.test_deploy_helpers import ALL_DEVICES, whole_lab  # noqa: F401 - fixture
from edgelab.artifacts.registry import add_artifact
from edgelab.catalog.pipelines import load_pipelines
from edgelab.deploy import planning
from edgelab.deploy.artifact_need import ArtifactNeed, ResolvedArtifact
from edgelab.deploy.artifacts import missing, record, resolve
from edgelab.deploy.plan import ExecutionPlan, ProcessSpec
from edgelab.deploy.planning import DeployRequest
from edgelab.errors import Refusal
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope


def _files(tmp_path, *names: str):
    d = tmp_path / "files"
    d.mkdir(exist_ok=True)
    for n in names:
        (d / n).write_bytes(n.encode() * 64)
    return [d / n for n in names]


def test_resolve_returns_a_bound_plan_and_leaves_the_one_it_was_given(tmp_path):
    dbmod.dispose_engines()
    engine = get_engine(str(tmp_path / "reg.db"))
    server, gguf = _files(tmp_path, "llama-server", "m.gguf")
    with session_scope(engine) as s:
        add_artifact(s, "llama-x86", [server], kind="runtime", target="linux-x86_64", component="llama.cpp")
        add_artifact(
            s, "lm-test", [gguf], kind="model", target="any", component="lm-pipe", meta={"weights": "random"}
        )
    proc = ProcessSpec("server", ["{bin}/llama-server", "-m", "{art:model}"], env={"M": "{art:model}"})
    needs = [
        ArtifactNeed(
            role="runtime.llama.cpp",
            process="server",
            kind="runtime",
            runtime="llama.cpp",
            target="linux-x86_64",
            optional=False,
        ),
        ArtifactNeed(
            role="lm.model",
            stage="lm",
            process="server",
            placeholder="model",
            kind="model",
            ext=".gguf",
            pipeline="lm-pipe",
            pipeline_kind="text_lm",
            target="any",
            optional=False,
        ),
        ArtifactNeed(role="lm.tokenizer", stage="lm"),  # a stage's role: nothing registered
    ]
    given = ExecutionPlan("lm-pipe", "box", "S3", "llama.cpp", "", [], [proc], {}, artifacts=needs)
    before = json.dumps(given.to_dict())
    with session_scope(engine, write=False) as s:
        bound = resolve(s, given, ["linux-x86_64"])
    assert json.dumps(given.to_dict()) == before and given.artifacts == needs  # untouched
    build, model, tokenizer = bound.artifacts
    assert isinstance(build, ResolvedArtifact) and build.present and build.name == "llama-x86"
    assert build.programs == ["llama-server"] and build.files and build.names == ["llama-x86"]
    assert isinstance(model, ResolvedArtifact) and model.present and model.weights == "random"
    assert model.file and model.file.endswith("m.gguf") and model.bytes == gguf.stat().st_size
    assert isinstance(tokenizer, ResolvedArtifact) and not tokenizer.present
    (p,) = bound.processes
    assert p.argv == ["{bin}/llama-server", "-m", f"{{blob:{model.sha256}}}"] and p.links == {
        "llama-server": build.files["llama-server"]
    }
    assert p.env == {"M": f"{{blob:{model.sha256}}}"} and given.processes[0].links == {}
    assert any("llama-x86" in n for n in bound.notes) and given.notes == []
    assert missing(bound) == ["lm.tokenizer"] and missing(given) == [
        "runtime.llama.cpp",
        "lm.model",
        "lm.tokenizer",
    ]
    assert record(bound) == {"runtime.llama.cpp": "llama-x86", "lm.model": "lm-test", "lm.tokenizer": None}
    dbmod.dispose_engines()


DEVICES = ["orin-agx", "s25", "win-hx370-rtx5090", "wsl-hx370", "rb3g2"]


def _sweep(engine) -> set[tuple[str, ...]]:
    """Plan every pipeline on DEVICES; each plan's stored form reads back to itself. The shapes seen."""
    shapes: set[tuple[str, ...]] = set()
    for device in DEVICES:
        for pipeline in sorted(load_pipelines()):
            try:
                planned = planning.plan(engine, DeployRequest(device, pipeline))
            except Refusal:
                continue
            stored = json.dumps(planned.to_dict())  # what runs.plan / deployments.plan / --json hold
            back = ExecutionPlan.from_dict(json.loads(stored)["plan"])
            assert back.artifacts == planned.plan.artifacts, (device, pipeline)
            assert json.dumps(back.to_dict()) == json.dumps(planned.plan.to_dict()), (device, pipeline)
            shapes |= {tuple(a) for a in planned.to_dict()["plan"]["artifacts"]}
    return shapes


def test_every_plan_reads_back_from_its_stored_json_to_the_same_json(whole_lab, tmp_path):
    _url, engine = whole_lab
    bare = _sweep(engine)
    assert (
        "role",
        "stage",
        "process",
        "kind",
        "runtime",
        "target",
        "optional",
        "programs",
        "present",
    ) in bare
    server, completion, pyz, gguf = _files(
        tmp_path, "llama-server", "llama-completion", "edgelab.pyz", "m.gguf"
    )
    with session_scope(engine) as s:
        for target in ("linux-aarch64", "linux-x86_64", "android-arm64-v8a"):
            add_artifact(
                s,
                f"llama-{target}",
                [server, completion],
                kind="runtime",
                target=target,
                component="llama.cpp",
                meta={"source_commit": "abc", "build_key": "k"},
            )
            add_artifact(s, f"ref-{target}", [pyz], kind="runtime", target=target, component="reference")
        for pipe in sorted(load_pipelines()):
            recipe = {"n_layer": 2, "n_head_kv": 2, "head_dim": 64}
            add_artifact(
                s,
                f"{pipe}-m",
                [gguf],
                kind="model",
                target="any",
                component=pipe,
                meta={"weights": "random", "recipe": recipe},
            )
    found = _sweep(engine)
    keys = {k for shape in found for k in shape}
    # a build with its files, a zipapp bound to a placeholder, a model file with its size and shape
    assert {"files", "names", "source_commit", "build_key", "file", "bytes", "shape", "weights"} <= keys
