"""Launch templates: every template renders for every target it lists; optional groups, defaults,
deferred store paths and errors that name the file and line."""

from __future__ import annotations

import re

import pytest

from edgelab.errors import ConfigError, TemplateError
from edgelab.runtimes import load_runtimes
from edgelab.runtimes.launch import ART, BIN, find, pick_target, render
from edgelab.runtimes.spec import LAUNCH_PLACEHOLDERS

# A value for every placeholder a template may use (what a plan supplies), by name.
VALUES = {name: f"v-{name}" for name in LAUNCH_PLACEHOLDERS} | {"port": "18080", "threads": "4"}


def _templates():
    for spec in load_runtimes().values():
        for key, strategies in spec.launch.items():
            for strat, tpl in strategies.items():
                yield spec, key, strat, tpl
                if tpl.bench is not None:  # the variant `edgelab bench` runs renders the same way
                    yield spec, f"{key}+bench", strat, tpl.bench


def test_every_template_renders_for_every_target_it_lists():
    seen = 0
    for spec, _key, _strat, tpl in _templates():
        assert tpl.targets, tpl.ref
        for target in tpl.targets:
            assert target in spec.targets, f"{tpl.ref} lists {target} without a recipe"
            assert pick_target(tpl, [target]) == target
            r = render(tpl, dict(VALUES))
            words = " ".join(r.argv)
            assert not re.search(r"\{(?!bin\}|art:|blob:)[a-z_]+\}", words), (tpl.ref, words)
            for ph in tpl.artifacts:  # artifact-bound placeholders stay deferred to the device store
                if any(f"{{{ph}}}" in w for w in tpl.words()):
                    assert ART % ph in words, (tpl.ref, ph)
            if tpl.ready.kind in ("http", "port"):
                assert isinstance(r.ready["port"], int)
            seen += 1
    assert seen > 20


def test_known_runtimes_include_ncnn_and_each_real_runtime_has_a_template():
    specs = load_runtimes()
    assert {"llama.cpp", "mnn", "executorch", "ncnn", "vllm-omni", "reference"} <= set(specs)
    for name in ("llama.cpp", "mnn", "executorch", "ncnn", "vllm-omni", "reference"):
        assert specs[name].launch, name


def test_llama_server_template_launches_by_store_path_and_is_measured_from_the_lab():
    spec = load_runtimes()["llama.cpp"]
    tpl = find(spec, "spark-x2.5", "text_lm", "S3")
    assert tpl is not None and tpl.adapter == "llama-server" and tpl.ready.kind == "http"
    r = render(tpl, {"threads": 2, "run": "r1", "device": "d"})
    assert r.argv[0] == f"{BIN}/llama-server"
    assert r.argv[r.argv.index("-m") + 1] == ART % "model"
    assert r.argv[r.argv.index("--port") + 1] == "8080" and r.ready == {
        "kind": "http",
        "path": "/health",
        "port": 8080,
    }
    assert "-s" not in r.argv  # optional group without its value is dropped
    assert "-s" in render(tpl, {"threads": 2, "seed": 7}).argv
    assert r.env["OMP_WAIT_POLICY"] == "passive" and r.serves == "http://127.0.0.1:8080"
    s5 = find(spec, "spark-x2.5", "text_lm", "S5")
    assert s5 is not None and s5.adapter == "llama-completion" and f"{BIN}/llama-completion" in s5.words()


def test_s1_template_is_what_vllm_omni_documents():
    """`vllm serve MODEL --omni --deploy-config FILE --port P` from the device venv, as vLLM-Omni documents
    its online serving; the memory fractions live in the deploy config, not on the command line."""
    tpl = find(load_runtimes()["vllm-omni"], "qwen3-tts-0.6b", "tts", "S1")
    values = {
        "venv": "/home/u/.edgelab/venvs/vllm-omni-0.30.0",
        "model_id": "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
        "deploy_config": "vllm-omni-deploy.yaml",
        "stage_init_timeout": 300,
        "init_timeout": 600,
    }
    r = render(tpl, values)
    assert r.argv[:2] == ["/home/u/.edgelab/venvs/vllm-omni-0.30.0/bin/vllm", "serve"]
    assert r.argv[2] == ART % "model" and r.argv[3] == "--omni"  # the checkpoint, bound at planning
    assert r.argv[r.argv.index("--deploy-config") + 1] == "vllm-omni-deploy.yaml"
    assert r.argv[r.argv.index("--port") + 1] == "8091" and r.argv[r.argv.index("--host") + 1] == "127.0.0.1"
    assert r.argv[r.argv.index("--stage-init-timeout") + 1] == "300"
    assert "--gpu-memory-utilization" not in r.argv
    assert r.env == {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}  # no CPU binding, hub allowed
    cpu = render(tpl, {**values, "cpu_bind": "0-3", "hf_offline": "1"}).env
    assert cpu["VLLM_CPU_OMP_THREADS_BIND"] == "0-3" and cpu["HF_HUB_OFFLINE"] == "1"
    need = tpl.artifacts["model"]
    assert (need.layout, need.fallback, need.ext) == ("dir", "model_id", "config.json")


def test_a_missing_value_names_the_template_line():
    tpl = find(load_runtimes()["vllm-omni"], "qwen3-tts-0.6b", "tts", "S1")
    with pytest.raises(
        TemplateError,
        match=r"vllm-omni\.yaml:\d+: launch vllm-omni:qwen3-tts-0.6b:S1 needs a value "
        r"for \{venv\}",
    ):
        render(tpl, {})


def test_schema_errors_name_file_and_line(tmp_path):
    (tmp_path / "bad.yaml").write_text(
        "name: bad\nsource: {repo: https://x, ref: v1}\ntargets:\n  linux-x86_64:\n"
        "    toolchain: [cmake]\n    steps: [[cmake, '{src}']]\n    produces: [a]\n"
        "launch:\n  text_lm:\n    S3:\n      argv: ['{bin}/a', '{nope}']\n      ready: {kind: x}\n"
        "      adapter: magic\n      targets: [android-arm64]\n"
    )
    with pytest.raises(ConfigError) as err:
        load_runtimes(tmp_path)
    text = str(err.value)
    f = tmp_path / "bad.yaml"
    assert f"{f}:11: launch text_lm S3 uses unknown placeholder {{nope}}" in text
    assert f"{f}:12: launch text_lm S3 ready has none of log, http, port, alive" in text
    assert f"{f}:13: launch text_lm S3 adapter 'magic'" in text
    assert f"{f}:14: launch text_lm S3 lists target 'android-arm64' that has no recipe" in text


def test_a_build_the_cpu_cannot_run_makes_the_process_unavailable():
    """x86-64-v3 on a CPU without AVX2 would die of SIGILL: refused before launch, saying what is missing."""
    from edgelab.deploy import targetcheck
    from edgelab.deploy.artifact_need import artifact_from_dict
    from edgelab.deploy.plan import ExecutionPlan, ProcessSpec
    from edgelab.probe.facts import Facts

    def plan():
        proc = ProcessSpec("server", ["{bin}/llama-server"], runtime="llama.cpp")
        need = {
            "role": "runtime.llama.cpp",
            "process": "server",
            "kind": "runtime",
            "runtime": "llama.cpp",
            "present": True,
            "name": "llama.cpp-linux-x86_64-llama-server",
            "target": "linux-x86_64",
            "isa": "x86-64-v3",
        }
        arts = [artifact_from_dict(need)]  # as a stored plan holds it
        return ExecutionPlan("spark-x2.5", "box", "S3", "llama.cpp", "", [], [proc], {}, artifacts=arts)

    linux = {"os": {"family": "linux", "arch": "x86_64"}}
    old = Facts.from_dict({**linux, "cpu": {"raw_flags": ["lm", "sse2", "ssse3", "sse4_1", "sse4_2", "avx"]}})
    p = plan()
    refusal = targetcheck.check(p, old)
    assert refusal is not None and refusal.code == "build_target_mismatch"
    assert "needs x86-64-v3" in p.processes[0].unavailable and "avx2" in p.processes[0].unavailable
    assert "linux-x86_64" in refusal.remedy
    unknown = plan()
    targetcheck.check(unknown, Facts.from_dict(linux))
    assert "flags are unknown" in unknown.processes[0].unavailable  # unknown is not support
    new = plan()
    v3 = sorted({"lm", "sse2", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"})
    assert targetcheck.check(new, Facts.from_dict({**linux, "cpu": {"raw_flags": v3}})) is None
    assert new.processes[0].unavailable is None
