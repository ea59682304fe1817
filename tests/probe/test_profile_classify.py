"""Classification: facts parsed from real captures and from the virtual lab's persona files land on
the right catalog entry and class; unknown devices keep their raw IDs and say what came closest."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from edgelab.catalog import load_devices
from edgelab.probe import detect
from edgelab.probe.facts import Accelerator, CpuCluster, Facts, MemoryPool, merge
from edgelab.profile import classify

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).parents[1] / "corpus"
PERSONAS = REPO / "edgelab" / "sim" / "personas"
GIB = 1024**3

# persona file (relative to the persona, root/ stripped) -> detect.BY_NAME parser
_PERSONA_FILES = {
    "etc/nv_tegra_release": "nv_tegra_release",
    "sys/firmware/devicetree/base/model": "dt_model",
    "sys/firmware/devicetree/base/compatible": "dt_compatible",
    "proc/cpuinfo": "cpuinfo",
    "proc/meminfo": "meminfo",
    "proc/version": "proc_version",
    "etc/os-release": "os_release",
    "getprop.txt": "getprop",
    "dumpsys/battery.txt": "dumpsys_battery",
}


@pytest.fixture(scope="module")
def catalog():
    return load_devices(REPO / "devices")


def persona_facts(d: Path) -> Facts:
    """Parse a persona's files the way a collector would see them: known paths by their command,
    captured command outputs under data/ by detection, cpufreq and thermal as `grep .` lines."""
    frags, cpufreq, thermal = [], [], []
    for p in sorted(d.rglob("*")):
        if not p.is_file() or p.name == "persona.yaml" or p.parent.name == "bin":
            continue
        rel = p.relative_to(d).as_posix()
        sub = rel.removeprefix("root/")
        if "/cpufreq/" in sub:
            cpufreq.append(f"/{sub}:{p.read_text().strip()}")
        elif "/thermal/thermal_zone" in sub:
            thermal.append(f"/{sub}:{p.read_text().strip()}")
        elif sub in _PERSONA_FILES:
            frags.append((_PERSONA_FILES[sub], detect.BY_NAME[_PERSONA_FILES[sub]].parse(p.read_bytes())))
        elif sub.startswith("data/"):
            cmd = detect.detect(p.read_bytes())
            if cmd:
                frags.append((cmd.name, cmd.parse(p.read_bytes())))
    if cpufreq:
        frags.append(("cpufreq", detect.BY_NAME["cpufreq"].parse("\n".join(cpufreq))))
    if thermal:
        frags.append(("thermal", detect.BY_NAME["thermal"].parse("\n".join(thermal))))
    return merge([(name, res.facts) for name, res in frags])


PERSONA_ENTRY = {
    "orin-agx": "jetson-agx-orin-64gb",
    "orin-nano": "jetson-orin-nano-8gb",
    "thor": "jetson-agx-thor",
    "wsl-hx370": "hx370-rtx5090-wsl",
    "win-hx370-rtx5090": "hx370-rtx5090-win",
    "xelite-pc": "snapdragon-x-elite-pc",
    "s25": "galaxy-s25",
    "s24": "galaxy-s24",
    "rb3g2": "rb3-gen2",
    "sa8775p": "sa8775p-adp",
}


@pytest.mark.parametrize("name", sorted(PERSONA_ENTRY))
def test_each_persona_lands_on_its_entry_and_class(catalog, name):
    d = PERSONAS / name
    assert (d / "persona.yaml").is_file(), f"persona {name} missing"
    expected_class = yaml.safe_load((d / "persona.yaml").read_text())["device_class"]
    c = classify(persona_facts(d), catalog)
    assert c.entry_id == PERSONA_ENTRY[name], c.reasons
    assert c.device_class == expected_class
    assert c.score >= 2 and c.reasons[0].startswith(f"entry {c.entry_id} ")


def test_the_rtx_laptop_also_serves_its_variant_matrix_rows(catalog):
    c = classify(persona_facts(PERSONAS / "win-hx370-rtx5090"), catalog)
    assert c.entry.matrix_row == 4
    rows = " ".join(c.also_serves)
    for row in (2, 5, 6, 7):
        assert f"matrix row {row}" in rows
    assert c.generic_class == "cuda_discrete"


# corpus file -> (entry id or None for unknown, class): a single capture that identifies the device
CORPUS_CASES = {
    "jetson/agx-thor-devkit_l4t38.4.0_jetson_release-v.txt": ("jetson-agx-thor", "jetson"),
    "jetson/agx-thor-devkit_r38.2.0_jtop-error-log.txt": ("jetson-agx-thor", "jetson"),
    "jetson/orin-nano-devkit_l4t35.5.0_jetson_release-v.txt": ("jetson-orin-nano-8gb", "jetson"),
    "jetson/agx-orin-devkit-industrial_l4t36.4.3_hostnamectl.txt": ("jetson-agx-orin", "jetson"),
    "jetson/agx-orin-devkit_r36.4.4_nv_tegra_release.txt": (None, "jetson"),
    "jetson/agx-orin-devkit_r35.4.1_nv_tegra_release.txt": (None, "jetson"),
    "android/poco-f6_sm8635_getprop.txt": (None, "npu_phone"),
    "android/xiaomi-12s_sm8475_getprop.txt": (None, "npu_phone"),
    "nvidia-smi/rtx4080super_fedora44_drv595.71.05_nvidia-smi.txt": (None, "cuda_discrete"),
    "nvidia-smi/rtx4000-sff-ada_drv595.84_nvidia-smi-q-x.xml": (None, "cuda_discrete"),
    "nvidia-smi/geforce-rtx3060_wsl2_drv546.80_cuda-err_nvidia-smi.txt": (None, "cuda_discrete"),
    "linux/xeon-gold-6326-2s_lscpu.txt": (None, "x86_cpu"),
    "linux/rk3399_lscpu.txt": (None, "arm64_cpu"),
    "windows/lenovo-83ED-snapdragon-x-elite_systeminfo.txt": (None, "arm64_cpu"),
    "windows/ryzen-ai-9-hx-370_win_cpufetch-debug.txt": ("hx370-win-cpu", "x86_cpu"),
}


@pytest.mark.parametrize("rel", sorted(CORPUS_CASES))
def test_corpus_captures_classify(catalog, rel):
    path = CORPUS / rel
    assert path.is_file(), f"corpus file {rel} missing"
    cmd = detect.detect(path.read_bytes())
    assert cmd is not None
    facts = merge([(cmd.name, cmd.parse(path.read_bytes()).facts)])
    entry, cls = CORPUS_CASES[rel]
    c = classify(facts, catalog)
    assert (c.entry.id if c.entry else None) == entry, c.reasons
    assert c.device_class == cls
    if entry is None:
        assert c.closest and c.reasons[0].startswith("no catalog entry matches")


def test_unknown_phone_keeps_raw_ids_and_names_the_closest_entry(catalog):
    path = CORPUS / "android/poco-f6_sm8635_getprop.txt"
    facts = detect.BY_NAME["getprop"].parse(path.read_bytes()).facts
    c = classify(facts, catalog)
    assert c.entry is None and c.device_class == "npu_phone"
    assert c.raw_ids["soc_part"] == "SM8635" and c.raw_ids["board_platform"] == "pineapple"
    assert "POCO" in c.raw_ids["model"]
    assert "soc_part=['SA8775P']: no (facts: 'SM8635')" in c.closest or "soc_part=['SM8650']" in c.closest


def test_x_elite_systeminfo_alone_is_unknown_but_closest_to_the_x_elite_entry(catalog):
    path = CORPUS / "windows/lenovo-83ED-snapdragon-x-elite_systeminfo.txt"
    facts = detect.BY_NAME["systeminfo"].parse(path.read_bytes()).facts
    c = classify(facts, catalog)
    assert c.entry is None and c.device_class == "arm64_cpu"
    assert c.closest.startswith("snapdragon-x-elite-pc: ")
    assert c.raw_ids["model"] == "83ED" and c.raw_ids["os_family"] == "windows"


def _jetson(model: str, ram_gib: float, pnumber: str | None = None) -> Facts:
    f = Facts()
    f.identity.model = model
    f.identity.module_pnumber = pnumber
    f.os.family, f.os.arch, f.os.l4t_version = "linux", "aarch64", "36.4.4"
    f.memory.pools.append(MemoryPool(kind="ram", total_bytes=int(ram_gib * GIB)))
    f.memory.unified = True
    return f


@pytest.mark.parametrize("ram, entry", [(61.3, "jetson-agx-orin-64gb"), (30.4, "jetson-agx-orin-32gb")])
def test_agx_orin_32_and_64_told_apart_by_ram(catalog, ram, entry):
    c = classify(_jetson("NVIDIA Jetson AGX Orin Developer Kit", ram), catalog)
    assert c.entry_id == entry
    assert "jetson-agx-orin" in " ".join(c.also_serves)  # the family entry held too, with fewer rules


def test_agx_orin_without_ram_falls_back_to_the_family_entry(catalog):
    f = _jetson("NVIDIA Jetson AGX Orin Developer Kit", 1)
    f.memory.pools.clear()
    c = classify(f, catalog)
    assert c.entry_id == "jetson-agx-orin" and c.device_class == "jetson"


def test_unknown_soc_gets_a_generic_class_and_keeps_raw_ids(catalog):
    f = Facts()
    f.identity.soc_part, f.identity.model, f.identity.board_platform = "SM9999", "Prototype X", "future"
    f.os.family, f.os.arch = "android", "aarch64"
    f.accelerators.append(Accelerator(kind="npu", vendor="Qualcomm", name="Hexagon v99"))
    c = classify(f, catalog)
    assert c.entry is None and c.entry_id == "unknown"
    assert c.device_class == "npu_phone" and "Hexagon v99" in c.reasons[0]
    assert c.raw_ids["soc_part"] == "SM9999" and c.raw_ids["board_platform"] == "future"
    assert c.to_dict()["entry"] == "unknown"


def test_unknown_tegra_is_jetson_and_unknown_nvidia_dgpu_is_cuda_discrete(catalog):
    f = Facts()
    f.identity.soc_part, f.os.l4t_version = "tegra300", "40.1.0"
    c = classify(f, catalog)
    assert c.device_class == "jetson" and c.raw_ids["l4t_version"] == "40.1.0"
    g = Facts()
    g.os.family, g.os.arch = "linux", "x86_64"
    g.accelerators.append(Accelerator(kind="gpu", vendor="NVIDIA", name="NVIDIA H100"))
    g.memory.pools.append(MemoryPool(kind="vram", device="0", total_bytes=80 * GIB))
    assert classify(g, catalog).device_class == "cuda_discrete"
    h = Facts()
    assert classify(h, catalog).device_class == "arm64_cpu"  # nothing known: most conservative CPU defaults


def test_variant_entries_never_beat_the_machines_own_entry(catalog):
    f = Facts()
    f.os.family, f.os.arch, f.os.is_wsl = "windows", "x86_64", False
    f.cpu.model = "AMD Ryzen AI 9 HX 370 w/ Radeon 890M"
    f.accelerators += [
        Accelerator(kind="gpu", vendor="AMD", name="AMD Radeon(TM) 890M Graphics"),
        Accelerator(kind="npu", vendor="AMD", name="NPU Compute Accelerator Device"),
    ]
    c = classify(f, catalog)
    # the joint-execution variant holds 3 rules and the 890M variant 3, the CPU entry only 2: the machine wins
    assert c.entry_id == "hx370-win-cpu" and c.device_class == "x86_cpu"
    assert {"hx370-890m-win (matrix row 5)", "hx370-npu-win (matrix row 6)"} <= set(c.also_serves)


def test_wsl_without_gpu_passthrough_is_the_cpu_row(catalog):
    f = Facts()
    f.os.family, f.os.arch, f.os.is_wsl = "linux", "x86_64", True
    f.cpu.model = "AMD Ryzen AI 9 HX 370 w/ Radeon 890M"
    f.cpu.clusters = [CpuCluster(cpus=list(range(24)))]
    c = classify(f, catalog)
    assert c.entry_id == "hx370-wsl-cpu" and c.device_class == "x86_cpu" and c.entry.matrix_row == 1
