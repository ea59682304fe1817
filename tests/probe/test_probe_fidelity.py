"""Issue 28: every field the real tools print becomes a typed probe fact, on the public captures added
to tests/corpus (sources in tests/corpus/SOURCES.md); EXPECTED.yaml asserts the flat view, these the
typed facts, the warnings and the classification that read them."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgelab.catalog.devices import load_devices
from edgelab.probe import detect, tables
from edgelab.probe.facts import Engine, Facts, GpuProcess, merge
from edgelab.profile.classify import classify

CORPUS = Path(__file__).parents[1] / "corpus"


def parse(rel: str):
    text = (CORPUS / rel).read_bytes()
    cmd = detect.detect(text)
    assert cmd is not None, rel
    return cmd.parse(text)


# ---------------------------------------------------------------- tegrastats, TX2 to Thor


def test_tegrastats_engines_are_typed_with_load_and_clock_apart_and_off_kept():
    res = parse("jetson/jetson-6cpu-7620MB_tegrastats-nvenc-nvdec.txt")
    engines = {e.name: e for e in res.facts.engines}
    assert engines["NVENC"] == Engine(name="NVENC", load_pct=1.0, mhz=[115], on=True)
    assert engines["NVDEC"] == Engine(name="NVDEC", load_pct=40.0, mhz=[115], on=True)
    assert engines["VIC"] == Engine(name="VIC", load_pct=31.0, mhz=[115], on=True)
    assert engines["GR3D"] == Engine(name="GR3D", load_pct=84.0, mhz=[713], on=True)
    assert engines["EMC"] == Engine(name="EMC", load_pct=18.0, mhz=[3199], on=True)
    for off in ("NVJPG", "NVJPG1", "OFA", "NVDLA0", "PVA0"):
        assert engines[off] == Engine(name=off, on=False), off
    assert engines["APE"] == Engine(name="APE", mhz=[174], on=True)  # a clock, no load printed
    p = res.facts.power
    assert (p.rails_mw["VDD_IN"], p.rails_avg_mw["VDD_IN"]) == (17946, 15710)
    swap = res.facts.pools("swap")[0]
    assert swap.cached_bytes == 202 * 1024 * 1024 and swap.used_bytes == 2640 * 1024 * 1024
    assert not res.warnings


def test_tegrastats_of_each_generation_parses_whole():
    """TX2 (L4T 32, rails without mW), Nano (IRAM, POM rails), AGX Xavier (rails named like the
    temperature sensors), Orin (engines with clocks), Thor (three-figure rails): nothing left over."""
    tx2 = parse("jetson/jetson-6cpu-7852MB_tegrastats.txt")
    assert tx2.facts.power.rails_avg_mw["VDD_SYS_DDR"] == 601 and {e.name for e in tx2.facts.engines} == {
        "EMC",
        "GR3D",
    }
    nano = parse("jetson/jetson-4cpu-3957MB-iram_tegrastats.txt")
    assert nano.values["iram_total_kb"] == 252 and nano.facts.power.rails_mw["POM_5V_GPU"] == 41
    xavier = parse("jetson/agx-xavier_jp4.2_tegrastats.txt")
    assert xavier.facts.power.rails_mw["GPU"] == 463 and xavier.facts.power.temperatures_c["GPU"] == 30.5
    thor = parse("jetson/agx-thor_jp7.2-l4t39.2_tegrastats.txt")
    assert thor.facts.power.rails_peak_mw == {
        "VDD_GPU": 37528,
        "VDD_CPU_SOC_MSS": 18961,
        "VIN_SYS_5V0": 18331,
        "VIN": 87426,
    }
    assert thor.facts.power.rails_avg_mw["VIN"] == 43713 and thor.facts.engines == []  # JP 7.2: no GR3D
    for res in (tx2, nano, xavier, thor):
        assert "unparsed" not in res.values and not res.warnings


def test_thor_l4t38_clock_only_engines_and_temperature_limits():
    """Shapes from NVIDIA's L4T 38 Tegrastats page and a JetPack 7.2 Thor (the WendyOS PR's second,
    shortened line): a clock with no load, one clock per GPC, an off engine, a temperature limit."""
    res = detect.parse_any(
        "RAM 105265/125772MB (lfb 34x4MB) CPU [0%@972,8%@972] EMC_FREQ 0%@2750 GR3D_FREQ @[314,314,314] "
        "NVENC0_FREQ @314 VIC off APE 300 gpu@41.843C/41.843C VDD_GPU -392mW/-392mW"
    )
    engines = {e.name: e for e in res.facts.engines}
    assert engines["GR3D"] == Engine(name="GR3D", load_pct=None, mhz=[314, 314, 314], on=True)
    assert engines["NVENC0"].mhz == [314] and engines["VIC"].on is False
    assert res.values["gr3d_mhz"] == [314, 314, 314] and "gr3d_load_pct" not in res.values
    assert res.facts.power.temperatures_c["gpu"] == 41.843 and res.facts.power.rails_mw["VDD_GPU"] == -392
    assert not res.warnings


def test_an_unknown_tegrastats_token_is_kept_and_named_in_a_warning():
    res = detect.parse_any("RAM 100/200MB CPU [1%@100] FOO_BAR 3 weird-token")
    assert res.values["unparsed"] == ["weird-token"] and "weird-token" in res.warnings[0]


# ---------------------------------------------------------------- nvidia-smi default table


def test_nvidia_smi_state_is_a_probe_fact():
    """The H200 host the issue names: temperature, power draw and cap, perf state, MIG mode and an
    empty processes table, on the accelerator itself (not only in the sampler)."""
    acc = parse("nvidia-smi/h200_ubuntu22.04_drv590.48.01_idle_nvidia-smi.txt").facts.accelerators[0]
    assert (acc.name, acc.temperature_c, acc.power_draw_w, acc.power_cap_w) == (
        "NVIDIA H200",
        28.0,
        77.0,
        700.0,
    )
    assert (acc.perf_state, acc.fan_pct, acc.utilization_pct, acc.mig_mode) == ("P0", None, 0, "Disabled")
    assert acc.processes == []  # "No running processes found": known empty, not unknown
    busy = parse("nvidia-smi/h200_ubuntu22.04_drv590.48.01_load_nvidia-smi.txt").facts.accelerators[0]
    assert busy.processes is not None and [p.pid for p in busy.processes] == [10291, 10293, 10309]
    assert busy.processes[2] == GpuProcess(
        pid=10309, type="C", name="./gpu_burn", memory_mib=28234, gpu_instance="N/A", compute_instance="N/A"
    )


def test_nvidia_smi_mig_devices_and_instances_per_process():
    res = parse("nvidia-smi/h100-80gb-mig_ubuntu22.04_drv590.48.01_load_nvidia-smi.txt")
    acc = res.facts.accelerators[0]
    assert acc.mig_mode == "Enabled" and acc.mig_devices == 4 and acc.utilization_pct is None
    assert {(p.gpu_instance, p.compute_instance) for p in acc.processes or []} == {("2", "0")}


def test_nvidia_smi_windows_processes_without_memory():
    acc = parse("nvidia-smi/rtx2080super_win_drv591.86_load_nvidia-smi.txt").facts.accelerators[0]
    assert acc.fan_pct == 38 and acc.perf_state == "P2" and acc.mig_mode == "N/A"
    procs = acc.processes or []
    assert len(procs) == 12 and all(p.memory_mib is None for p in procs)
    assert {p.type for p in procs} == {"C+G", "C"}


def test_a_table_cut_before_the_processes_box_leaves_processes_unknown():
    acc = parse("nvidia-smi/geforce-rtx3060_wsl2_drv546.80_cuda-err_nvidia-smi.txt").facts.accelerators[0]
    assert acc.processes is None and acc.mig_mode is None and acc.temperature_c == 54.0


# ---------------------------------------------------------------- /proc/version


def test_wsl1_proc_version_names_its_windows_build_and_compiler():
    res = parse("wsl/wsl1-4.4.0-18985_proc-version.txt")
    assert res.facts.os.windows_build == "18985" and res.facts.os.wsl_generation == 1
    assert res.values["compiler"] == "gcc version 5.4.0 (GCC)"  # no trailing space
    assert res.facts.software["kernel_compiler"] == "gcc 5.4.0"
    first = parse("wsl/wsl1-3.4.0-build14393_proc-version.txt")
    assert first.facts.os.windows_build is None
    assert first.warnings == ["WSL1 release 3.4.0-Microsoft names no Windows build"]


@pytest.mark.parametrize(
    ("banner", "want"),
    [
        (
            "(gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38)",
            ("gcc", "11.4.0", "GNU ld", "2.38"),
        ),
        (
            "(Android (8508608, based on r450784e) clang version 14.0.7 (https://android.googlesource.com/"
            "toolchain/llvm-project 4c603efb0cca074e9238af8b4106c30add4418f6), LLD 14.0.7)",
            ("clang", "14.0.7", "LLD", "14.0.7"),
        ),
        (
            "(aarch64-buildroot-linux-gnu-gcc.br_real (Buildroot 2020.08) 9.3.0, GNU ld (GNU Binutils) 2.33.1)",
            ("gcc", "9.3.0", "GNU ld", "2.33.1"),
        ),
    ],
)
def test_kernel_toolchain_as_name_and_version(banner, want):
    res = detect.parse_any(f"Linux version 5.15.0-91-generic (buildd@host) {banner} #101 SMP Tue Nov 14 2023")
    v = res.values
    assert (v["compiler_name"], v["compiler_version"], v["linker_name"], v["linker_version"]) == want


# ---------------------------------------------------------------- Android build.prop / getprop


@pytest.mark.parametrize(
    ("rel", "part", "name", "board", "device", "npu_api"),
    [
        ("android/xiaomi-mi-mix2-chiron_msm8998_vendor-build.prop.txt", "MSM8998", "Snapdragon 835", "msm8998",
         "chiron", "Hexagon DSP v62 (HVX)"),
        ("android/xiaomi-mi8-dipper_sdm845_vendor-build.prop.txt", "SDM845", "Snapdragon 845", "sdm845", "dipper",
         "QNN DSP v65"),
        ("android/xiaomi-mi9-cepheus_sm8150_vendor-build.prop.txt", "SM8150", "Snapdragon 855", "cepheus",
         "cepheus", "QNN DSP v66"),
        ("android/oneplus-nord-n10-5g_sm6350_getprop.txt", "SM6350", "Snapdragon 690", "lito", "OnePlusN10TMO",
         "QNN DSP v66"),
        ("android/xiaomi-12s_sm8475_getprop.txt", "SM8475", "Snapdragon 8+ Gen 1", "taro", "mayfly", "QNN HTP v69"),
    ],
)  # fmt: skip
def test_older_qualcomm_phones_have_a_soc_identity(rel, part, name, board, device, npu_api):
    res = parse(rel)
    i = res.facts.identity
    assert (i.soc_part, i.soc_name, i.board, i.device) == (part, name, board, device)
    npu = [a for a in res.facts.accelerators if a.kind == "npu"]
    assert npu and npu[0].apis == [npu_api]
    assert not res.warnings


def test_the_qualcomm_table_spans_ten_years_with_marketing_names():
    want = {
        "MSM8996": "Snapdragon 820",
        "MSM8998": "Snapdragon 835",
        "SDM845": "Snapdragon 845",
        "SM8150": "Snapdragon 855",
        "SM8150-AC": "Snapdragon 855+",
        "SM8250-AC": "Snapdragon 870",
        "SM8250-AB": "Snapdragon 865+",
        "SM8250": "Snapdragon 865",
        "SM8350": "Snapdragon 888",
        "SM8450": "Snapdragon 8 Gen 1",
        "SM8550": "Snapdragon 8 Gen 2",
        "SM8650": "Snapdragon 8 Gen 3",
        "SM8750-AB": "Snapdragon 8 Elite",
        "SM8850": "Snapdragon 8 Elite Gen 5",
        "SDM660": "Snapdragon 660",
        "SM7150-AC": "Snapdragon 732G",
        "SM7325": "Snapdragon 778G",
        "SM6375": "Snapdragon 695",
        "MSM8953": "Snapdragon 625",
    }
    assert {p: (tables.qualcomm_part(p) or {}).get("name") for p in want} == want
    for platform, part in (
        ("msm8998", "MSM8998"),
        ("sdm845", "SDM845"),
        ("msmnile", "SM8150"),
        ("kona", "SM8250"),
    ):
        assert tables.board_platform(platform)[0] == part


def test_an_unknown_part_is_kept_raw_and_said_so():
    res = detect.parse_any("ro.board.platform=canoe\nro.soc.manufacturer=QTI\nro.soc.model=SM9999\n")
    assert res.facts.identity.soc_part == "SM9999" and res.facts.identity.soc_name is None
    assert res.warnings == ["Qualcomm part SM9999 not in the qualcomm table: no name, GPU or NPU (kept raw)"]


# ---------------------------------------------------------------- lscpu topology


def test_lscpu_topology_that_does_not_multiply_out_is_a_warning():
    res = parse("linux/s390x-lpar-kvm-ibm-z_lscpu.txt")
    assert res.warnings == [
        "lscpu topology does not multiply out: 2 threads per core x 8 cores per socket x 3 sockets per book"
        " x 8 books = 384, but CPU(s) is 8 (a virtual machine or partition reporting a made-up topology;"
        " physical cores unknown)"
    ]
    assert res.facts.cpu.physical_cores is None and res.facts.cpu.logical_cores == 8
    vm = detect.parse_any(
        "Architecture:            x86_64\nCPU(s):                  8\nThread(s) per core:      2\n"
        "Core(s) per socket:      8\nSocket(s):               1\nHypervisor vendor:       KVM\n"
    )
    assert "2 threads per core x 8 cores per socket x 1 sockets = 16, but CPU(s) is 8" in vm.warnings[0]


@pytest.mark.parametrize(
    "rel", ["linux/power9-phyp-lpar_lscpu.txt", "linux/xeon-gold-6126-2s_lscpu.txt", "linux/rk3399_lscpu.txt"]
)
def test_lscpu_topology_that_multiplies_out_is_quiet(rel):
    assert not parse(rel).warnings


def test_a_hybrid_lscpu_counts_each_core_type():
    """A DGX-Spark-like lscpu (SDL-Hercules-390/hyperion#842) lists each core type with its own
    topology: 10 + 10 = 20 CPUs, no warning; a cluster topology (ThunderX) multiplies by clusters."""
    hybrid = (
        "Architecture:                aarch64\nCPU(s):                      20\nVendor ID:                   ARM\n"
        "  Model name:                Cortex-X925\n    Thread(s) per core:      1\n"
        "    Core(s) per socket:      10\n    Socket(s):               1\n"
        "  Model name:                Cortex-A725\n    Thread(s) per core:      1\n"
        "    Core(s) per socket:      10\n    Socket(s):               1\n"
    )
    assert not detect.parse_any(hybrid).warnings
    clusters = (
        "Architecture:                aarch64\nCPU(s):                      96\n"
        "  Model name:                ThunderX-88XX\n    Thread(s) per core:      1\n"
        "    Core(s) per cluster:     48\n    Socket(s):               2\n    Cluster(s):              2\n"
    )
    assert not detect.parse_any(clusters).warnings


# ---------------------------------------------------------------- classification and warning sources


def _facts(outputs: dict[str, str]) -> Facts:
    facts, _ = detect.facts_from_outputs({k: (CORPUS / v).read_text() for k, v in outputs.items()})
    return facts


def test_a_gpu_server_is_never_closest_to_a_jetson():
    """The x86-64 H200 host of the issue: no catalog entry; the closest is of its own class or none."""
    catalog = load_devices()
    facts = _facts(
        {
            "nvidia_smi": "nvidia-smi/h200_ubuntu22.04_drv590.48.01_idle_nvidia-smi.txt",
            "lscpu": "linux/xeon-gold-6326-2s_lscpu.txt",
        }
    )
    c = classify(facts, catalog)
    assert c.entry is None and c.device_class == "cuda_discrete"
    classes = {e.id: e.device_class for e in catalog.entries}
    if c.closest:
        assert classes[c.closest.split(":")[0]] == "cuda_discrete"
    assert "jetson" not in (c.closest or "")
    cuda = [e for e in catalog.entries if e.device_class == "cuda_discrete"]
    assert (c.closest is None) == (not cuda)


def test_an_android_phone_is_closest_to_a_phone():
    catalog = load_devices()
    c = classify(parse("android/xiaomi-mi9-cepheus_sm8150_vendor-build.prop.txt").facts, catalog)
    classes = {e.id: e.device_class for e in catalog.entries}
    assert c.entry is None and c.closest and classes[c.closest.split(":")[0]] == "npu_phone"


def test_every_merge_and_parser_warning_names_its_source_command():
    """Two captures of one Thor disagree on L4T; each warning names the commands it comes from."""
    outputs = {
        "jetson_release": (CORPUS / "jetson/agx-thor-devkit_l4t38.4.0_jetson_release-v.txt").read_text(),
        "jtop_error_log": (CORPUS / "jetson/agx-thor-devkit_r38.2.0_jtop-error-log.txt").read_text(),
        "lscpu": (CORPUS / "linux/s390x-lpar-kvm-ibm-z_lscpu.txt").read_text(),
        "mystery": "nothing any parser knows\n",
    }
    facts, results = detect.facts_from_outputs(outputs)
    commands = {r.command for r in results}
    assert facts.warnings
    for w in facts.warnings:
        assert "?" not in w.split(":")[0]
        assert any(w.startswith(f"{c}: ") or f" {c} says " in w or f": {c} says " in w for c in commands), w
    assert "mystery: output not recognized" in facts.warnings


def test_a_conflict_inside_a_whole_fact_names_the_command_that_gave_it():
    """An accelerator (or a battery) arrives whole, so its fields have no provenance of their own;
    a later disagreement names the command that gave the whole fact, never '?'."""
    xml = parse("nvidia-smi/rtx4000-sff-ada_drv595.84_nvidia-smi-q-x.xml")
    other = parse("nvidia-smi/rtx4000-sff-ada_drv595.84_nvidia-smi-q-x.xml")
    other.facts.accelerators[0].driver_version = "1.0"
    m = merge([("nvidia-smi -q -x", xml.facts), ("nvidia-smi", other.facts)])
    assert any(
        w.startswith("accelerators[0].driver_version: nvidia-smi -q -x says '595.84', nvidia-smi says '1.0'")
        for w in m.warnings
    ), m.warnings


def test_new_facts_survive_a_round_trip():
    for rel in (
        "jetson/jetson-6cpu-7620MB_tegrastats-nvenc-nvdec.txt",
        "nvidia-smi/h100-80gb-mig_ubuntu22.04_drv590.48.01_load_nvidia-smi.txt",
    ):
        f = parse(rel).facts
        assert Facts.from_dict(f.to_dict()) == f


def test_the_summary_shows_raw_ids_where_the_tables_have_no_row():
    from edgelab.probe.summary import summarize

    unknown = detect.parse_any("ro.board.platform=canoe\nro.soc.manufacturer=QTI\nro.soc.model=SM9999\n")
    assert summarize(unknown.facts.to_dict())["soc_model"] == "SM9999 (not in the tables)"
    bare = detect.parse_any("ro.board.platform=zzz1\nro.product.model=X1\n")
    assert summarize(bare.facts.to_dict())["soc_model"] == "platform zzz1 / X1"
    known = parse("android/xiaomi-mi-mix2-chiron_msm8998_vendor-build.prop.txt")
    assert summarize(known.facts.to_dict())["soc_model"] == "Snapdragon 835 / Mi MIX 2"
