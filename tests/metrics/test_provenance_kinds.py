# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""One provenance for every kind of run: a deployment, a bench, a playbook's run and an import store
the same keys (edgelab.metrics.provenance.PROVENANCE_KEYS) with the same meanings, and `bench
--json` prints the stored block whole."""

from __future__ import annotations

import json
from pathlib import Path

from deploy.test_deploy_helpers import cli_env, deploy_lab  # noqa: F401 - fixture
from typer.testing import CliRunner

from edgelab.bench import BenchRequest, run_bench
from edgelab.cli import app
from edgelab.deploy import control, launch
from edgelab.deploy.planning import DeployRequest
from edgelab.metrics.provenance import PROVENANCE_KEYS, UNKNOWN
from edgelab.metrics.results import import_study
from edgelab.playbook.runner import run_playbook
from edgelab.playbook.schema import parse_playbook
from edgelab.store.db import session_scope
from edgelab.store.runs import get_run

STUDY = Path(__file__).parents[1] / "fixtures" / "study_run"
PLAY = """
name: provenance-play
devices: [rb3g2]
steps:
  - name: tts
    bench: {workload: tts, warmup: 0, requests: 1, frames: 3, frames_per_s: 0}
    timeout: 120
"""


def _prov(engine, run_id: str) -> dict:
    with session_scope(engine, write=False) as s:
        return dict(get_run(s, run_id).provenance)


def test_deploy_bench_play_and_import_store_one_provenance(deploy_lab, ssh_lab):
    url, engine, opts = deploy_lab
    dep = launch.deploy(engine, DeployRequest("s25", "qwen3-tts"), opts=opts)
    control.stop(engine, dep.run_id, opts=opts)
    bench = run_bench(
        engine,
        BenchRequest("orin-agx", "qwen3-tts", warmup=0, requests=1, frames=3, frames_per_s=0),
        opts=opts,
    )
    from edgelab.catalog.yamlsrc import load_text
    from edgelab.playbook.schema import Playbook

    pb: Playbook = parse_playbook(load_text(PLAY, "provenance-play.yaml"), "provenance-play.yaml")
    played = run_playbook(engine, pb)
    assert played.ok, played
    play_run = next(st.run_id for st in played.jobs[0].steps if st.run_id)
    imported = import_study(engine, STUDY)

    provs = {
        "deploy": _prov(engine, dep.run_id),
        "bench": _prov(engine, bench.run_id),
        "play": _prov(engine, play_run),
        "import": _prov(engine, imported),
    }
    for kind, prov in provs.items():
        assert set(prov) == set(PROVENANCE_KEYS), (kind, set(prov) ^ set(PROVENANCE_KEYS))
    # the same meanings: the reference's build is edgelab's package, its weights random, on every device run
    for kind in ("deploy", "bench", "play"):
        p = provs[kind]
        assert p["runtime"] == "reference" and p["weights"] == "random", kind
        assert p["runtime_build"].startswith("edgelab ") and len(p["runtime_sha256"]) == 64, kind
        assert p["strategy_label"].endswith("(reference imitation)") and p["virtual"] is True, kind
        assert p["cache"] in ("cold", "warm") and p["command"] != UNKNOWN, kind
        assert p["threads"] is None, kind  # the reference's command sets no thread count: null, not unknown
        assert p["endpoint"] is None and p["imported"] is None, kind
    assert provs["play"]["play"] == {"playbook": "provenance-play", "job": "rb3g2", "step": "tts"}
    assert provs["deploy"]["play"] is None and provs["deploy"]["source"] == "deploy"
    imp = provs["import"]
    assert imp["source"] == "imported" and imp["imported"]["requests_sha256"]
    assert imp["runtime_build"] == UNKNOWN and imp["cache"] == UNKNOWN  # not known for a study's machine

    # `bench --json` prints the stored block whole
    res = CliRunner().invoke(
        app,
        [
            "--db",
            url,
            "bench",
            "qwen3-tts",
            "--device",
            "s25",
            "--warmup",
            "0",
            "--requests",
            "1",
            "--frames",
            "3",
            "--json",
        ],
        env=cli_env(url, ssh_lab),
    )
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["provenance"] == _prov(engine, rep["run"])
    assert rep["strategy"].endswith("(reference imitation)")
