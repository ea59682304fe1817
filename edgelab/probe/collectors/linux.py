"""Linux collector (Jetson, WSL, ARM boards, x86): one sh script over SSH."""

from __future__ import annotations

import re

from edgelab.probe.collectors import posix
from edgelab.probe.collectors.base import Collector, Source
from edgelab.probe.collectors.posix import Snippet, readable
from edgelab.probe.facts import Facts
from edgelab.transport.quoting import Shell

DT = "/sys/firmware/devicetree/base"
GPU_QUERY = "index,name,pci.bus_id,driver_version,memory.total,memory.used,temperature.gpu"

TEGRASTATS = (
    "sh -c 'echo $$; exec \"$@\"' sh ${T:+timeout} $F ${T:+$TO} tegrastats --interval 200"
    " | { read -r pid; IFS= read -r line; rc=$?; kill \"$pid\" 2>/dev/null;"
    " [ -n \"$line\" ] && printf '%s\\n' \"$line\"; exit $rc; }"
)

SNIPPETS = [
    posix.read_file("nv_tegra_release", "/etc/nv_tegra_release"),
    Snippet("dt_model", readable(f"{DT}/model"), f"tr '\\000' '\\n' < {DT}/model", reads=True),
    Snippet("dt_compatible", readable(f"{DT}/compatible"), f"tr '\\000' '\\n' < {DT}/compatible", reads=True),
    Snippet("jetson_release", "have jetson_release", "t 8 jetson_release -v"),
    Snippet("os_release", "{ OSR=/etc/os-release; [ -r $OSR ] || OSR=/usr/lib/os-release; [ -r $OSR ]; }",
            "cat $OSR", reads=True),
    Snippet("hostnamectl", "have hostnamectl", "t $TO hostnamectl"),
    Snippet("uname", "", "t $TO uname -a"),
    posix.PROC_VERSION,
    posix.CPUINFO,
    Snippet("lscpu", "have lscpu", "t $TO lscpu"),
    posix.CPUFREQ,
    posix.MEMINFO,
    posix.THERMAL,
    Snippet("nvpmodel", "have nvpmodel", "t $TO nvpmodel -q"),
    # tegrastats never exits by itself: take its first line as soon as it prints, then kill it
    # (``sh -c 'echo $$; exec ...'`` hands over the pid); waiting for it to notice the closed
    # pipe would cost one more interval.
    Snippet("tegrastats", "have tegrastats", TEGRASTATS),
    Snippet("nvidia_smi_csv", "have nvidia-smi",
            f"t $TO nvidia-smi --query-gpu={GPU_QUERY},compute_cap --format=csv"
            f" || t $TO nvidia-smi --query-gpu={GPU_QUERY} --format=csv"),
    Snippet("nvidia_smi", "have nvidia-smi", "t $TO nvidia-smi"),
    Snippet("wsl_lib", "[ -d /usr/lib/wsl ]", "ls -1 /usr/lib/wsl/lib; [ -e /dev/dxg ] && echo /dev/dxg; true"),
]


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


SOURCES = (
    Source("nv_tegra_release", "cat /etc/nv_tegra_release", "nv_tegra_release"),
    Source("jetson_release", "jetson_release -v", "jetson_release"),
    Source("dt_model", f"cat {DT}/model", "dt_model"),
    Source("dt_compatible", f"cat {DT}/compatible", "dt_compatible"),
    Source("os_release", "cat /etc/os-release", "os_release"),
    Source("hostnamectl", "hostnamectl", "hostnamectl"),
    Source("uname", "uname -a", "uname"),
    Source("proc_version", "cat /proc/version", "proc_version"),
    Source("cpuinfo", "cat /proc/cpuinfo", "cpuinfo"),
    Source("lscpu", "lscpu", "lscpu"),
    Source("cpufreq", "grep . /sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq", "cpufreq"),
    Source("meminfo", "cat /proc/meminfo", "meminfo"),
    Source("thermal", "grep . /sys/class/thermal/thermal_zone*/{type,temp}", "thermal"),
    Source("nvpmodel", "nvpmodel -q", "nvpmodel"),
    Source("tegrastats", "tegrastats", "tegrastats"),
    Source("nvidia_smi_csv", f"nvidia-smi --query-gpu={GPU_QUERY},compute_cap --format=csv", "nvidia_smi_csv"),
    Source("nvidia_smi", "nvidia-smi", "nvidia_smi"),
    Source("wsl_lib", "ls /usr/lib/wsl/lib", apply_wsl_lib),
)


def build_script(nonce: str, per_source_timeout: float) -> str:
    return posix.script(nonce, SNIPPETS, per_source_timeout)


def _post(facts: Facts, sections) -> None:
    if "nv_tegra_release" in sections and facts.memory.unified is None:
        facts.memory.unified = True  # every Tegra SoC shares DRAM between CPU and GPU


COLLECTOR = Collector("linux", 1, SOURCES, build_script, Shell.POSIX, _post)
