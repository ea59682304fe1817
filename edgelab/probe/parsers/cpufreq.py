"""cpufreq from ``grep . /sys/devices/system/cpu/cpu*/cpufreq/*`` style output: clusters of cores by
maximum frequency, fastest first, so threads go to the big cluster first."""

from __future__ import annotations

import re

from edgelab.probe.facts import CpuCluster
from edgelab.probe.parsers.base import ParseResult, parser, to_int

_LINE = re.compile(r"/sys/devices/system/cpu/(?:cpu(\d+)/cpufreq|cpufreq/policy(\d+))/(\w+):\s*(.*)$")


@parser("grep . /sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq")
def parse_cpufreq(text: str, res: ParseResult) -> None:
    v, f = res.values, res.facts
    per_cpu: dict[int, dict[str, str]] = {}
    policies: dict[int, dict[str, str]] = {}
    for line in text.split("\n"):
        m = _LINE.search(line.strip())
        if not m:
            continue
        if m[1] is not None:
            per_cpu.setdefault(int(m[1]), {})[m[3]] = m[4].strip()
        else:
            policies.setdefault(int(m[2]), {})[m[3]] = m[4].strip()
    for pol in policies.values():  # policyN/related_cpus + cpuinfo_max_freq
        cpus = [int(c) for c in re.findall(r"\d+", pol.get("related_cpus", pol.get("affected_cpus", "")))]
        for c in cpus:
            for k, val in pol.items():
                per_cpu.setdefault(c, {}).setdefault(k, val)
    max_khz: dict[int, int] = {}
    for cpu, attrs in sorted(per_cpu.items()):
        val = to_int(attrs.get("cpuinfo_max_freq") or attrs.get("scaling_max_freq") or "")
        if val is not None:
            max_khz[cpu] = val
        elif attrs:
            res.warnings.append(f"cpu{cpu}: no readable max frequency")
    if not max_khz:
        return
    v["cpu_count"] = len(max_khz)
    v["max_freq_khz"] = {f"cpu{c}": k for c, k in max_khz.items()}
    groups: dict[int, list[int]] = {}
    for cpu, khz in max_khz.items():
        groups.setdefault(khz, []).append(cpu)
    clusters = [CpuCluster(cpus=groups[k], max_khz=k) for k in sorted(groups, reverse=True)]
    v["clusters"] = [{"cpus": c.cpus, "max_khz": c.max_khz} for c in clusters]
    v["cluster_count"] = len(clusters)
    v["big_cpus"] = clusters[0].cpus
    f.cpu.clusters = clusters
    f.cpu.logical_cores = len(max_khz)
