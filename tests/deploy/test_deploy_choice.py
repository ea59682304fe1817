# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""The default choice on the virtual lab: every device x pipeline x strategy is planned, and a plan
is free of refusal exactly when it can launch; the CLI's dry run exits 0 only then (1: cannot run,
2: a misspelt name); a run under a strategy whose real runtime did not run is labelled so."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from deploy.test_deploy_helpers import ALL_DEVICES, whole_lab  # noqa: F401 - fixture
from edgelab.catalog.pipelines import load_pipelines
from edgelab.cli import app
from edgelab.deploy import planning
from edgelab.deploy.choice import runtime_order
from edgelab.deploy.planning import DeployRequest
from edgelab.errors import Refusal
from edgelab.labels import strategy_label

runner = CliRunner()


def _launchable(planned: planning.Planned) -> bool:
    p = planned.plan
    blocked = any(pr.unavailable for pr in p.processes)
    missing = any(not a.present and not a.optional for a in p.artifacts)
    return not blocked and not missing


def test_every_plan_of_the_sweep_is_refused_exactly_when_it_cannot_launch(whole_lab):
    _url, engine = whole_lab
    seen = {"launchable": 0, "refused": 0}
    for device in ALL_DEVICES:
        for pipeline in sorted(load_pipelines()):
            for strategy in (None, "S1", "S3", "S4", "S5"):
                try:
                    planned = planning.plan(engine, DeployRequest(device, pipeline, strategy))
                except Refusal:
                    seen["refused"] += 1  # refused before a plan exists (strategy not eligible)
                    continue
                ok = planned.refusal is None
                assert ok == (
                    _launchable(planned) and not any(not a.get("fits", True) for a in planned.admission)
                ), (device, pipeline, strategy, planned.refusal)
                seen["launchable" if ok else "refused"] += 1
                if ok and strategy is None and planned.plan.runtime == "reference":
                    assert "runtime reference (imitation)" in planned.plan.reason, (device, pipeline)
    assert seen["launchable"] > 40 and seen["refused"] > 40, seen


def test_a_text_lm_without_a_build_is_refused_with_what_to_build_not_planned_on_the_reference(whole_lab):
    _url, engine = whole_lab
    planned = planning.plan(engine, DeployRequest("orin-agx", "spark-x2.5"))
    assert planned.plan.runtime == "llama.cpp" and planned.plan.strategy == "S3"  # the preferred candidate
    r = planned.refusal
    assert r is not None and r.code == "no_exported_graph"
    assert (
        "a llama.cpp build for linux-aarch64 with llama-server" in r.detail  # the device's own target
        and "also tried: S5 llama.cpp" in r.detail
    )
    assert "edgelab runtime build llama.cpp --target linux-aarch64" in r.remedy
    assert [t["runtime"] for t in r.numbers["tried"]][:2] == ["llama.cpp", "llama.cpp"]


def test_runtime_preference_follows_the_backends_and_ends_without_the_reference(whole_lab):
    _url, engine = whole_lab
    planned = planning.plan(engine, DeployRequest("orin-agx", "internvla-a1", "S3"))
    from edgelab.deploy.strategies.common import PlanContext

    ctx = PlanContext(
        device="orin-agx",
        spec=load_pipelines()["internvla-a1"],
        profile=planned.profile,
        pipeline_profile=planned.profile.pipeline("internvla-a1"),
        run_id="r",
        remote_dir="/tmp/r",
        virtual=True,
    )
    order = runtime_order(ctx, "S3")
    assert "reference" not in order and set(order) == {"mnn", "onnxruntime"}
    assert runtime_order(ctx, "S1") == []  # vLLM-Omni serves no VLA: S1 has no real runtime here
    # nothing exported in this database: the reference runs, and the plan says which real runtimes lack what
    assert planned.plan.runtime == "reference" and planned.refusal is None
    assert "no real runtime can launch here (S3 mnn:" in planned.plan.reason


def _cli(url, ssh_lab, *args):
    return runner.invoke(
        app, ["--db", url, *args], env={"EDGELAB_DB": url, "EDGELAB_SIM_DIR": str(ssh_lab.state_dir)}
    )


def test_dry_run_exit_codes_gate_ci(whole_lab, ssh_lab):
    url, _engine = whole_lab
    ok = _cli(url, ssh_lab, "deploy", "qwen3-tts", "--device", "s25", "--dry-run", "--json")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["refusal"] is None
    unlaunchable = _cli(url, ssh_lab, "deploy", "spark-x2.5", "--device", "s25", "--dry-run", "--json")
    assert (
        unlaunchable.exit_code == 1
        and json.loads(unlaunchable.stdout)["refusal"]["code"] == "no_exported_graph"
    )
    human = _cli(url, ssh_lab, "deploy", "spark-x2.5", "--device", "s25", "--dry-run")
    assert human.exit_code == 1 and "(missing)" in human.stdout and "error: no_exported_graph" in human.stderr
    too_big = _cli(url, ssh_lab, "deploy", "qwen3.8-27b", "--device", "rb3g2", "--dry-run")
    assert too_big.exit_code == 1 and "budget_exceeds_device" in too_big.stderr
    for args in (
        ("deploy", "no-such-pipeline", "--device", "s25", "--dry-run"),
        ("deploy", "qwen3-tts", "--device", "s25", "--strategy", "S9", "--dry-run"),
        ("deploy", "qwen3-tts", "--device", "s25", "--runtime", "nope", "--dry-run"),
    ):
        res = _cli(url, ssh_lab, *args)
        assert res.exit_code == 2, (args, res.output)
        assert res.stderr.startswith("error: unknown "), res.stderr


def test_reference_runs_are_labelled_as_an_imitation_of_their_strategy(whole_lab, ssh_lab):
    assert strategy_label("S1", "reference") == "S1 (reference imitation)"
    assert strategy_label("S3", "llama.cpp") == "S3"
    url, _engine = whole_lab
    human = _cli(url, ssh_lab, "deploy", "qwen3-tts", "--device", "orin-agx", "--dry-run")
    assert human.exit_code == 0, human.output
    assert "strategy S1 (reference imitation) runtime reference" in human.stdout


def test_qwen3_tts_names_llama_cpp_first_and_without_its_build_says_what_to_run(whole_lab):
    """PIPELINE_RUNTIMES puts llama.cpp's own Qwen3-TTS engine (S3: the s3-controller, S5: llama-tts)
    before the phone's backends; with nothing built or synthesized the reference runs, said so, and
    the plan names the commands that would make llama.cpp the choice."""
    _url, engine = whole_lab
    planned = planning.plan(engine, DeployRequest("s25", "qwen3-tts"))
    from edgelab.deploy.strategies.common import PlanContext

    ctx = PlanContext(
        device="s25",
        spec=load_pipelines()["qwen3-tts-0.6b"],
        profile=planned.profile,
        pipeline_profile=planned.profile.pipeline("qwen3-tts-0.6b"),
        run_id="r",
        remote_dir="/tmp/r",
        virtual=True,
    )
    assert runtime_order(ctx, "S3")[0] == "llama.cpp" and runtime_order(ctx, "S5")[0] == "llama.cpp"
    p = planned.plan
    assert p.runtime == "reference" and planned.refusal is None
    assert "no real runtime can launch here (S3 llama.cpp:" in p.reason
    (how,) = [n for n in p.notes if n.startswith("for llama.cpp (S3) instead of the reference:")]
    assert "`edgelab runtime build llama.cpp --target android-arm64`" in how  # the phone's own target
    assert "`edgelab model synth qwen3-tts-0.6b`" in how
