"""Linux collector (Jetson, WSL, ARM boards, x86): one sh script over SSH."""

from __future__ import annotations

import re

from edgelab.probe.collectors import posix
from edgelab.probe.collectors.base import Collector, Source
from edgelab.probe.collectors.posix import readable
from edgelab.probe.facts import Facts
from edgelab.probe.parsers.vllm import VENVS_GLOB, apply_vllm_venvs

DT = "/sys/firmware/devicetree/base"
GPU_QUERY = "index,name,pci.bus_id,driver_version,memory.total,memory.used,temperature.gpu"

TEGRASTATS = (
    "${T:+timeout} $F ${T:+$TO} sh -c 'echo $$; exec \"$@\"' sh tegrastats --interval 200"
    ' | { read -r pid; IFS= read -r line; rc=$?; kill "$pid" 2>/dev/null;'
    ' [ -n "$line" ] && printf \'%s\\n\' "$line"; exit $rc; }'
)


def apply_wsl_lib(facts: Facts, text: str, label: str) -> None:
    """``/usr/lib/wsl/lib`` listing: WSL's GPU passthrough (dxg, libcuda from the Windows driver)."""
    names = {ln.strip().rsplit("/", 1)[-1] for ln in text.splitlines() if ln.strip()}
    found = {"wsl_gpu_passthrough": "dxg" if "dxg" in names else "libraries only"}
    cuda = sorted(n for n in names if re.match(r"libcuda\.so", n))
    if cuda:
        found["wsl_libcuda"] = cuda[0]
    if "libd3d12.so" in names:
        found["wsl_d3d12"] = "libd3d12.so"
    for key, value in found.items():
        if key not in facts.software:
            facts.software[key] = value
            facts.provenance[f"software.{key}"] = label


# One entry per source, in merge order (the script runs the file reads first, together): the
# section name, what an operator would type, the parser, then what the script runs (body, guard).
SOURCES = (
    posix.read_file("nv_tegra_release", "/etc/nv_tegra_release"),
    Source(
        "jetson_release",
        "jetson_release -v",
        "jetson_release",
        "t 8 jetson_release -v",
        "have jetson_release",
    ),
    Source(
        "dt_model",
        f"cat {DT}/model",
        "dt_model",
        f"tr '\\000' '\\n' < {DT}/model",
        readable(f"{DT}/model"),
        reads=True,
    ),
    Source(
        "dt_compatible",
        f"cat {DT}/compatible",
        "dt_compatible",
        f"tr '\\000' '\\n' < {DT}/compatible",
        readable(f"{DT}/compatible"),
        reads=True,
    ),
    Source(
        "os_release",
        "cat /etc/os-release",
        "os_release",
        "cat $OSR",
        "{ OSR=/etc/os-release; [ -r $OSR ] || OSR=/usr/lib/os-release; [ -r $OSR ]; }",
        reads=True,
    ),
    Source("hostnamectl", "hostnamectl", "hostnamectl", "t $TO hostnamectl", "have hostnamectl"),
    posix.UNAME,
    posix.PROC_VERSION,
    posix.CPUINFO,
    Source("lscpu", "lscpu", "lscpu", "t $TO lscpu", "have lscpu"),
    posix.CPUFREQ,
    posix.MEMINFO,
    posix.THERMAL,
    Source("nvpmodel", "nvpmodel -q", "nvpmodel", "t $TO nvpmodel -q", "have nvpmodel"),
    # tegrastats never exits by itself: take its first line as soon as it prints, then kill it
    # (``sh -c 'echo $$; exec ...'`` hands over the pid); waiting for it to notice the closed
    # pipe would cost one more interval. The pid is tegrastats' own, under the timeout: killing
    # the timeout instead and counting on it to pass the signal on raced on a loaded host (the
    # tool outlived it, holding the pipe open until the probe's own timeout; 2 of 15 here).
    Source("tegrastats", "tegrastats", "tegrastats", TEGRASTATS, "have tegrastats"),
    Source(
        "nvidia_smi_csv",
        f"nvidia-smi --query-gpu={GPU_QUERY},compute_cap --format=csv",
        "nvidia_smi_csv",
        f"t $TO nvidia-smi --query-gpu={GPU_QUERY},compute_cap --format=csv"
        f" || t $TO nvidia-smi --query-gpu={GPU_QUERY} --format=csv",
        "have nvidia-smi",
    ),
    Source("nvidia_smi", "nvidia-smi", "nvidia_smi", "t $TO nvidia-smi", "have nvidia-smi"),
    Source(
        "wsl_lib",
        "ls /usr/lib/wsl/lib",
        apply_wsl_lib,
        "ls -1 /usr/lib/wsl/lib; [ -e /dev/dxg ] && echo /dev/dxg; true",
        "[ -d /usr/lib/wsl ]",
    ),
    # the stamps of vLLM-Omni venvs `edgelab runtime install` made (versions, imports, platform)
    Source(
        "vllm_venvs",
        "cat ~/.edgelab/venvs/*/.edgelab-runtime.json",
        apply_vllm_venvs,
        f'for f in {VENVS_GLOB}; do printf \'== %s\\n\' "$f"; cat "$f"; echo; done',
        f"ls {VENVS_GLOB} >/dev/null 2>&1",
        reads=True,
    ),
)


def _post(facts: Facts, sections) -> None:
    if "nv_tegra_release" in sections and facts.memory.unified is None:
        facts.memory.unified = True  # every Tegra SoC shares DRAM between CPU and GPU


COLLECTOR = Collector("linux", 1, SOURCES, posix.script, _post)
