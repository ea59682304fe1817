"""Deploy profiles: the budget rule by hand-computed cases, strategy refusals with reasons,
threads/dtype/backends, the TTS chunk schedule, and the explanation trail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgelab.catalog import load_devices, load_pipelines
from edgelab.probe.facts import Accelerator, CpuCluster, Facts, MemoryPool
from edgelab.profile import derive_profile

REPO = Path(__file__).resolve().parents[2]
GIB = 1024**3
MIB = 1024**2


@pytest.fixture(scope="module")
def catalog():
    return load_devices(REPO / "devices")


def agx_orin_64(ram_bytes: int = 64 * GIB) -> Facts:
    f = Facts()
    f.identity.model, f.identity.module_pnumber, f.identity.soc_part = (
        "NVIDIA Jetson AGX Orin Developer Kit",
        "p3701-0005",
        "tegra234",
    )
    f.os.family, f.os.arch, f.os.l4t_version = "linux", "aarch64", "36.4.4"
    f.cpu.clusters = [CpuCluster(cpus=list(range(12)), max_khz=2201600)]
    f.memory.pools.append(MemoryPool(kind="ram", total_bytes=ram_bytes))
    f.memory.unified = True
    f.accelerators.append(
        Accelerator(
            kind="gpu", vendor="NVIDIA", name="Orin integrated GPU", apis=["CUDA sm_87"], cuda_arch="sm_87"
        )
    )
    return f


def galaxy_s25(ram_bytes: int = 12 * GIB) -> Facts:
    f = Facts()
    f.identity.model, f.identity.soc_part, f.identity.board_platform = "Galaxy S25", "SM8750", "sun"
    f.os.family, f.os.arch = "android", "aarch64"
    f.cpu.features = ["neon", "fp16", "dotprod", "i8mm", "bf16"]
    f.cpu.clusters = [
        CpuCluster(cpus=[6, 7], max_khz=4473600),
        CpuCluster(cpus=[0, 1, 2, 3, 4, 5], max_khz=3532800),
    ]
    f.memory.pools.append(MemoryPool(kind="ram", total_bytes=ram_bytes))
    f.memory.unified = True
    f.accelerators += [
        Accelerator(kind="gpu", vendor="Qualcomm", name="Adreno 830", apis=["Vulkan", "OpenCL"]),
        Accelerator(kind="npu", vendor="Qualcomm", name="Hexagon v79", apis=["QNN HTP v79"]),
    ]
    return f


def test_budget_rule_for_a_64_gib_jetson_with_qwen3_tts_17b_bf16(catalog):
    p = derive_profile(agx_orin_64(), catalog, "qwen3-tts-1.7b")
    pp = p.pipeline("qwen3-tts-1.7b")
    b = pp.fit.budget
    # by hand: weights 1.7e9 + 0.14e9 + 0.11e9 params x 2 bytes; activations 15 % (above the 512 MiB floor);
    # headroom 3 GiB (Jetson); KV per token 2 x 28 x 8 x 128 x 2 bytes (the talker)
    weights = 3_400_000_000 + 280_000_000 + 220_000_000
    assert b.weights_bytes == weights == 3_900_000_000
    assert b.activation_bytes == 585_000_000
    assert b.headroom_bytes == 3 * 1024**3
    assert b.kv_budget_bytes == 68_719_476_736 - 3_900_000_000 - 585_000_000 - 3_221_225_472 == 61_013_251_264
    assert b.kv_bytes_per_token == 114_688
    assert b.max_tokens == 61_013_251_264 // 114_688 == 531_993
    assert b.max_seqs == 2 and b.max_tokens_per_seq == 531_993 // 2
    assert pp.quantization == "bf16" and p.dtype == "bf16"
    assert pp.fit.load_time_s == round(3_900_000_000 / 0.8e9, 1) == 4.9
    assert p.budget_pool.name == "ram" and p.budget_pool.total_bytes == 64 * GIB


def test_activation_floor_of_512_mib_on_a_phone(catalog):
    p = derive_profile(galaxy_s25(), catalog, "qwen3-tts-0.6b")
    b = p.pipeline("qwen3-tts-0.6b").fit.budget
    weights = 1_200_000_000 + 280_000_000 + 220_000_000  # fp16: phones compute in fp16
    assert b.quantization == "fp16" and b.weights_bytes == weights
    assert int(0.15 * weights) < 512 * MIB == b.activation_bytes
    assert b.headroom_bytes == 1 * GIB
    assert b.kv_budget_bytes == 12 * GIB - weights - 512 * MIB - GIB


def test_quantization_steps_down_until_it_fits_and_refuses_when_nothing_does(catalog):
    # MiniCPM-o 4.5 on a 12 GiB phone: 16-bit weights (~17 GiB) cannot fit, q8_0 (~9.9 GiB) neither with headroom
    p = derive_profile(galaxy_s25(), catalog, "minicpm-o-4.5")
    pp = p.pipeline("minicpm-o-4.5")
    assert [b.quantization for b in pp.fit.tried] == ["fp16", "q8_0", "q4"]
    assert pp.quantization == "q4"
    assert not pp.fit.tried[0].fits and not pp.fit.tried[1].fits
    # 27B on the same phone: even q4 (~14 GiB) exceeds the pool -> every local strategy is refused with the pool
    q = derive_profile(galaxy_s25(), catalog, "qwen3.8-27b").pipeline("qwen3.8-27b")
    assert q.quantization is None and q.eligible == []
    s3 = q.strategy("S3")
    assert s3.code == "budget_exceeds_device" and "ram: even q4 weights" in s3.reason


def test_s1_refused_on_a_phone_with_the_reason(catalog):
    pp = derive_profile(galaxy_s25(), catalog, "qwen3-tts-1.7b").pipeline("qwen3-tts-1.7b")
    s1 = pp.strategy("S1")
    assert not s1.eligible
    assert (
        s1.reason
        == "class npu_phone: S1 needs vLLM-Omni on the device (none installed: `edgelab runtime install vllm-omni`) or a Jetson-class CUDA server"
    )
    assert pp.eligible == ["S3", "S5"]


def test_s1_on_jetsons_only_with_enough_memory(catalog):
    big = derive_profile(agx_orin_64(), catalog, "qwen3-tts-1.7b").pipeline("qwen3-tts-1.7b")
    assert big.strategy("S1").eligible and "95-355 s" in big.strategy("S1").reason
    nano = agx_orin_64(int(7.4 * GIB))
    nano.identity.model, nano.identity.module_pnumber = "NVIDIA Orin Nano Developer Kit", "p3767-0005"
    small = derive_profile(nano, catalog, "qwen3-tts-1.7b").pipeline("qwen3-tts-1.7b")
    assert not small.strategy("S1").eligible
    assert small.strategy("S1").reason.startswith("jetson-orin-nano-8gb: S1 needs AGX Orin 32/64 GB or Thor")
    vla = derive_profile(agx_orin_64(), catalog, "pi0").pipeline("pi0")
    assert not vla.strategy("S1").eligible and "no vLLM-Omni serving path" in vla.strategy("S1").reason


def test_s2_always_refused_and_s4_needs_an_endpoint(catalog):
    for facts in (agx_orin_64(), galaxy_s25()):
        p = derive_profile(facts, catalog)
        for pp in p.pipelines:
            s2 = pp.strategy("S2")
            assert not s2.eligible and "not recommend" in s2.reason
            s4 = pp.strategy("S4")
            assert not s4.eligible and s4.code == "no_endpoint" and "endpoint" in s4.reason
            assert all(s.reason for s in pp.strategies)
    with_ep = derive_profile(galaxy_s25(), catalog, endpoint_configured=True)
    tts = with_ep.pipeline("qwen3-tts-1.7b").strategy("S4")
    assert tts.eligible and "code2wav" in tts.reason
    vla = with_ep.pipeline("pi0").strategy("S4")
    assert vla.eligible and "re-planning tier only, never in the control loop" in vla.reason
    text = with_ep.pipeline("spark-x2.5").strategy("S4")
    assert not text.eligible and text.code == "no_device_stage"


def test_chunk_schedule_respects_the_class_minimum_first_chunk(catalog):
    phone = (
        derive_profile(galaxy_s25(), catalog, "qwen3-tts-0.6b").pipeline("qwen3-tts-0.6b").fit.chunk_schedule
    )
    assert phone["ramp_frames"] == [4, 8, 16, 25] and phone["first_chunk_ms"] == 320.0
    assert phone["safety_margin_ms"] == 200
    assert phone["server"] == {"first_frames": 1, "steady_frames": 25, "left_context_frames": 72}
    jet = (
        derive_profile(agx_orin_64(), catalog, "qwen3-tts-0.6b").pipeline("qwen3-tts-0.6b").fit.chunk_schedule
    )
    assert jet["ramp_frames"] == [2, 4, 8, 16, 25] and jet["safety_margin_ms"] == 80
    assert derive_profile(agx_orin_64(), catalog, "pi0").pipeline("pi0").fit.chunk_schedule is None


def test_threads_big_cluster_first_and_little_cores_left_out(catalog):
    p = derive_profile(galaxy_s25(), catalog, "pi0")
    assert p.threads == 8 and p.thread_cpus == [6, 7, 0, 1, 2, 3, 4, 5]  # 3.53 GHz Oryon cores are not LITTLE
    f = galaxy_s25()
    f.cpu.clusters = [
        CpuCluster(cpus=[7], max_khz=3300000),
        CpuCluster(cpus=[3, 4, 5, 6], max_khz=3150000),
        CpuCluster(cpus=[0, 1, 2], max_khz=2270000),
    ]
    q = derive_profile(f, catalog, "pi0")
    assert q.threads == 5 and q.thread_cpus == [7, 3, 4, 5, 6]
    assert any(
        r.name == "threads" and "LITTLE cluster(s) left out: 3x core at 2.27 GHz" in r.why for r in q.rules
    )
    g = Facts()
    g.os.family, g.os.arch = "linux", "x86_64"
    g.cpu.physical_cores, g.cpu.logical_cores = 12, 24
    assert derive_profile(g, catalog, "pi0").threads == 12  # fallback: physical cores


def test_dtype_and_backends(catalog):
    jet = derive_profile(agx_orin_64(), catalog, "pi0")
    assert (
        jet.dtype == "bf16" and jet.backends[0] == "CUDA" and jet.runtime_target == "linux-aarch64-cuda-sm87"
    )
    phone = derive_profile(galaxy_s25(), catalog, "pi0")
    assert phone.dtype == "fp16" and phone.backends[:3] == ["QNN", "OpenCL", "Vulkan"]
    assert phone.backends[-1] == "CPU (KleidiAI, XNNPACK)" and phone.runtime_target == "android-arm64"
    cpu = Facts()
    cpu.os.family, cpu.os.arch = "linux", "aarch64"
    cpu.cpu.features = ["neon", "fp16"]
    cpu.memory.pools.append(MemoryPool(kind="ram", total_bytes=8 * GIB))
    arm = derive_profile(cpu, catalog, "pi0")
    assert arm.device_class == "arm64_cpu" and arm.dtype == "fp32" and arm.runtime_target == "linux-aarch64"
    assert arm.backends == ["CPU (XNNPACK)"]


def test_discrete_gpu_budget_uses_vram_not_host_ram(catalog):
    f = Facts()
    f.os.family, f.os.arch = "windows", "x86_64"
    f.cpu.model = "AMD Ryzen AI 9 HX 370 w/ Radeon 890M"
    f.memory.pools += [
        MemoryPool(kind="ram", total_bytes=32 * GIB),
        MemoryPool(kind="commit", total_bytes=37 * GIB),
    ]
    f.memory.unified = False
    f.accelerators.append(
        Accelerator(
            kind="gpu",
            vendor="NVIDIA",
            name="NVIDIA GeForce RTX 5090 Laptop GPU",
            memory_bytes=4 * GIB - 1,
            apis=["DirectML"],
        )
    )
    p = derive_profile(f, catalog, "spark-x2.5")
    assert p.classification.entry_id == "hx370-rtx5090-win" and p.device_class == "cuda_discrete"
    # AdapterRAM saturates at 4 GiB: the catalog's 24 GB is used instead, and the rule says so
    assert p.budget_pool.name == "vram:catalog" and p.budget_pool.total_bytes == 24 * GIB
    assert any(r.name == "vram_from_adapter_ram" for r in p.rules)
    assert {x.name for x in p.pools} >= {"ram", "commit", "vram:catalog"}
    assert p.dtype == "bf16" and p.backends[0] == "CUDA" and p.runtime_target == "windows-x64-cuda"


def test_unknown_device_profile_uses_generic_rules(catalog):
    f = Facts()
    f.identity.soc_part = "RK3588"
    f.os.family, f.os.arch = "linux", "aarch64"
    f.memory.pools.append(MemoryPool(kind="ram", total_bytes=16 * GIB))
    p = derive_profile(f, catalog, "qwen3-tts-0.6b")
    assert p.classification.entry is None and p.device_class == "arm64_cpu"
    assert p.runtime_target == "linux-aarch64" and p.pipeline("qwen3-tts-0.6b").eligible == ["S3", "S5"]
    assert p.classification.raw_ids["soc_part"] == "RK3588"
    nothing = derive_profile(Facts(), catalog, "qwen3-tts-0.6b")
    pp = nothing.pipeline("qwen3-tts-0.6b")
    assert nothing.budget_pool is None and pp.eligible == []
    assert pp.strategy("S5").code == "no_runtime_target"


def test_every_rule_is_recorded_and_the_profile_is_json(catalog):
    p = derive_profile(galaxy_s25(), catalog)
    assert {pp.pipeline for pp in p.pipelines} == set(load_pipelines())
    names = [r.name for r in p.rules]
    for needed in (
        "classify",
        "device_class",
        "class_defaults",
        "memory_pools",
        "budget_pool",
        "threads",
        "dtype",
        "backends",
        "runtime_target",
        "qwen3-tts-1.7b.quantization",
        "qwen3-tts-1.7b.chunk_schedule",
        "qwen3-tts-1.7b.S1",
        "pi0.load_time",
    ):
        assert needed in names, needed
    lines = p.explain()
    assert len(lines) == len(p.rules)
    assert any(
        "qwen3-tts-1.7b.S1: 'refused' <- class npu_phone: S1 needs vLLM-Omni on the device" in ln
        for ln in lines
    )
    data = json.loads(json.dumps(p.to_dict()))
    assert data["class"] == "npu_phone" and data["entry"] == "galaxy-s25"
    assert data["pipelines"][0]["strategies"][0]["strategy"] == "S1"
