"""Probe parsers against the real captures in tests/corpus (ground truth: tests/corpus/EXPECTED.yaml),
plus robustness: random text and corrupted captures never raise, in any parser or in detect."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from corpus import pin as corpus_pin  # tests/corpus/pin.py: tests/ is on sys.path, as for test helpers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgelab.probe import detect as detect_mod
from edgelab.probe import tables
from edgelab.probe.facts import Facts, merge
from edgelab.probe.parsers.base import INTERNAL_ERROR, ParseResult

CORPUS = Path(__file__).parents[1] / "corpus"
EXPECTED: dict = yaml.safe_load((CORPUS / "EXPECTED.yaml").read_text(encoding="utf-8"))
FILES = sorted(EXPECTED)
PINNED: dict = json.loads(corpus_pin.PINNED.read_text(encoding="utf-8"))


def read(rel: str) -> str:
    return (CORPUS / rel).read_bytes().decode("utf-8", errors="replace")


def _norm(x):
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, int | float):
        return float(x)
    if isinstance(x, str):
        s = x.strip()
        try:
            return float(s)
        except ValueError:
            return s
    return x


def fact_matches(key: str, expected, flat: dict) -> bool:
    """One EXPECTED fact against the flat view (strings/ints normalized, lists as sets)."""
    if key == "features_has":
        feats = flat.get("features")
        return bool(feats) and set(expected) <= set(feats)
    if key == "features_lacks":
        feats = flat.get("features")
        return bool(feats) and not (set(expected) & set(feats))
    if key not in flat:
        return False
    got = flat[key]
    if expected is None:
        return got is None
    if isinstance(expected, list):
        if not isinstance(got, list):
            return False
        if expected and isinstance(expected[0], dict):  # each expected row is a subset of some parsed row
            return all(
                any(
                    all(fact_matches(k, val, row) for k, val in exp.items())
                    for row in got
                    if isinstance(row, dict)
                )
                for exp in expected
            )
        return {str(_norm(e)) for e in expected} == {str(_norm(g)) for g in got}
    if isinstance(expected, dict):
        return isinstance(got, dict) and {k: _norm(v) for k, v in expected.items()} == {
            k: _norm(v) for k, v in got.items()
        }
    a, b = _norm(expected), _norm(got)
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9)
    return a == b


def parse_file(rel: str) -> tuple[str | None, ParseResult | None]:
    text = read(rel)
    cmd = detect_mod.detect(text)
    return (cmd.name if cmd else None), (cmd.parse(text) if cmd else None)


def expected_misses(rel: str, flat: dict) -> list[str]:
    """Each EXPECTED.yaml fact of ``rel`` that the flat view does not give exactly."""
    return [
        f"{rel}: {key}: expected {exp!r}, got {flat.get(key, '<missing>')!r}"
        for key, exp in (EXPECTED[rel].get("facts") or {}).items()
        if not fact_matches(key, exp, flat)
    ]


def test_corpus_recovery_fraction(capsys):
    """The recovered fraction is a report; each file's facts are asserted one by one below."""
    total = sum(len(EXPECTED[rel].get("facts") or {}) for rel in FILES)
    misses = []
    for rel in FILES:
        _, res = parse_file(rel)
        misses += expected_misses(rel, res.flat() if res else {})
    with capsys.disabled():
        print(
            f"\ncorpus facts recovered: {total - len(misses)}/{total} = {(total - len(misses)) / total:.1%}"
        )
        for m in misses:
            print("  miss:", m)
    assert total > 300


@pytest.mark.parametrize("rel", FILES)
def test_corpus_file_gives_every_expected_fact(rel):
    """Every fact the capture's source supports (EXPECTED.yaml), exactly: no fact may regress."""
    _, res = parse_file(rel)
    assert EXPECTED[rel].get("facts"), f"{rel}: EXPECTED.yaml lists no facts"
    misses = expected_misses(rel, res.flat() if res else {})
    assert not misses, "\n".join(misses)


@pytest.mark.parametrize("rel", corpus_pin.captures())
def test_corpus_file_parses_as_pinned(rel):
    """Everything the parsers read from the capture (values, typed facts, provenance, warnings) is as
    pinned in PARSED.json; after a deliberate change re-pin with ``python tests/corpus/pin.py``."""
    want = PINNED.get(rel, "<not pinned: run python tests/corpus/pin.py>")
    got = corpus_pin.parse(rel)
    assert got == want, "\n".join(_differences(want, got, rel))


def _differences(want, got, path: str) -> list[str]:
    """Each leaf where ``got`` differs from ``want``, named by its path."""
    if isinstance(want, dict) and isinstance(got, dict):
        return [
            d
            for k in sorted(set(want) | set(got), key=str)
            for d in _differences(want.get(k, "<absent>"), got.get(k, "<absent>"), f"{path}.{k}")
        ]
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [
            d
            for i, (w, g) in enumerate(zip(want, got, strict=True))
            for d in _differences(w, g, f"{path}[{i}]")
        ]
    return [] if want == got else [f"{path}: pinned {want!r}, parsed {got!r}"]


def test_every_capture_is_pinned_and_has_ground_truth():
    """A new capture gets its EXPECTED.yaml entry and its pin; the datadog tegrastats lines are read
    by tests/metrics/test_metrics_tegrastats.py, line by line, with their own expectations."""
    assert sorted(PINNED) == corpus_pin.captures()
    assert set(corpus_pin.captures()) - set(FILES) == {"jetson/datadog-agent_jetson_test_tegrastats.txt"}


SHARED = Path("/work/shared/corpus/probe")


@pytest.mark.skipif(not SHARED.is_dir(), reason="the shared corpus is not on this machine")
def test_captures_are_the_shared_corpus_byte_for_byte():
    """tests/corpus is a copy of ../shared/corpus/probe (plus captures added here, SOURCES.md); the
    shared ground truth is kept entry for entry, the entries of the added captures follow it."""
    shared = sorted(p.relative_to(SHARED).as_posix() for p in SHARED.rglob("*") if p.is_file())
    assert shared, SHARED
    for rel in shared:
        if rel == "EXPECTED.yaml":
            theirs = yaml.safe_load((SHARED / rel).read_text(encoding="utf-8"))
            assert {k: EXPECTED.get(k) for k in theirs} == theirs
        elif rel != "SOURCES.md":
            assert (CORPUS / rel).read_bytes() == (SHARED / rel).read_bytes(), rel


@pytest.mark.parametrize("rel", FILES)
def test_corpus_file_detected_and_parsed(rel):
    name, res = parse_file(rel)
    assert name is not None, f"{rel}: not detected"
    assert not any(w.startswith(INTERNAL_ERROR) for w in res.warnings), res.warnings
    assert res.values, f"{rel}: nothing parsed"
    # the typed fragment survives a round trip
    assert Facts.from_dict(res.facts.to_dict()) == res.facts


EXPECTED_COMMAND = {
    "cat /etc/nv_tegra_release": "nv_tegra_release",
    "jetson_release -v": "jetson_release",
    "nvpmodel -q": "nvpmodel",
    "tegrastats": "tegrastats",
    "cat /proc/cpuinfo": "cpuinfo",
    "hostnamectl": "hostnamectl",
    "adb shell getprop": "getprop",
    "cat build.prop": "build_prop",
    "dumpsys battery": "dumpsys_battery",
    "uname -a": "uname",
    "cat /proc/version": "proc_version",
    "systeminfo": "systeminfo",
    "nvidia-smi": "nvidia_smi",
    "nvidia-smi -q -x": "nvidia_smi_xml",
    "lscpu": "lscpu",
}


@pytest.mark.parametrize("rel", FILES)
def test_detect_names_the_right_command(rel):
    cmd = EXPECTED[rel]["command"]
    base = cmd.split(" (")[0]
    want = EXPECTED_COMMAND.get(cmd) or EXPECTED_COMMAND.get(base)
    if base.startswith("wsl"):
        want = "wsl_version"
    elif base.startswith("jtop"):
        want = "jtop_error_log"
    elif "--query-gpu" in base:
        want = "nvidia_smi_csv"
    elif base.startswith("nvidia-smi") and want is None:
        want = "nvidia_smi"
    elif "format-table" in base:
        want = "wmi_table"
    elif base.startswith("Get-WmiObject"):
        want = "wmi_list"
    for prefix, name in (("dxdiag", "dxdiag"), ("msinfo32", "msinfo32"), ("cpufetch", "cpufetch_debug")):
        if base.startswith(prefix):
            want = name
    assert want is not None, f"add a mapping for {cmd!r}"
    name, _ = parse_file(rel)
    assert name == want


# ---------------------------------------------------------------- typed facts and tables


def test_unknown_l4t_is_kept_and_said_unknown():
    _, res = parse_file("jetson/agx-orin-devkit_r39.2.0_jtop-error-log.txt")
    assert res.facts.os.l4t_version == "39.2.0"
    assert res.facts.os.jetpack is None
    assert any("JetPack: unknown for L4T 39.2.0" in w for w in res.warnings)


def test_known_l4t_maps_to_jetpack_and_soc_to_cuda_arch():
    _, res = parse_file("jetson/agx-orin-devkit_r35.4.1_nv_tegra_release.txt")
    assert res.facts.os.jetpack == "5.1.2"
    _, res = parse_file("jetson/agx-thor-devkit_r38.2.0_jtop-error-log.txt")
    f = res.facts
    assert f.identity.soc_part == "tegra264" and f.identity.module_pnumber == "p3834-0008"
    assert f.accelerators[0].cuda_arch == "sm_110" and f.memory.unified is True
    _, res = parse_file("jetson/orin-nano-devkit_l4t35.5.0_jetson_release-v.txt")
    assert res.facts.accelerators[0].cuda_arch == "sm_87"
    assert res.facts.identity.module_name.startswith("Jetson Orin Nano")


def test_android_soc_from_props_and_platform_table():
    _, res = parse_file("android/poco-f6_sm8635_getprop.txt")
    f = res.facts
    assert (f.identity.soc_part, f.identity.soc_name) == ("SM8635", "Snapdragon 8s Gen 3")
    assert f.os.android_sdk == 35 and f.os.family == "android" and f.cpu.arch == "aarch64"
    assert any(a.kind == "npu" and "QNN HTP v73" in a.apis for a in f.accelerators)
    _, res = parse_file("android/xiaomi-12s_sm8475_getprop.txt")
    assert res.facts.identity.soc_name == "Snapdragon 8+ Gen 1"


def test_cpu_features_normalized():
    _, res = parse_file("android/galaxy-s25plus_sm8750_proc-cpuinfo.txt")
    feats = set(res.facts.cpu.features)
    assert {"neon", "fp16", "dotprod", "i8mm", "bf16"} <= feats and "sve" not in feats
    assert res.facts.cpu.core_names == ["Oryon"]
    _, res = parse_file("android/xiaomi-14_sd8gen3_proc-cpuinfo.txt")
    assert set(res.facts.cpu.core_names) == {"Cortex-X4", "Cortex-A720", "Cortex-A520"}


def test_wsl_generations_from_kernel_names():
    for rel, gen in [("wsl/wsl2-4.19.104-legacy-name_uname-a.txt", 2), ("wsl/wsl2-5.10.16.3_uname-a.txt", 2)]:
        _, res = parse_file(rel)
        assert res.facts.os.wsl_generation == gen
    res = detect_mod.parse_any(
        "Linux DESKTOP 4.4.0-19041-Microsoft #1237-Microsoft Sat Sep 11 14:32:00 PST 2021 "
        "x86_64 x86_64 x86_64 GNU/Linux"
    )
    assert res.values["wsl_generation"] == 1
    res = detect_mod.parse_any(
        "Linux pi 6.1.21-v8+ #1642 SMP PREEMPT Mon Apr  3 17:24:16 BST 2023 aarch64 GNU/Linux"
    )
    assert res.values["is_wsl"] is False and res.values["machine"] == "aarch64"


def test_nvidia_smi_err_marks_cuda_unknown():
    _, res = parse_file("nvidia-smi/geforce-rtx3060_wsl2_drv546.80_cuda-err_nvidia-smi.txt")
    acc = res.facts.accelerators[0]
    assert acc.usable is None and "ERR!" in acc.reason
    assert res.facts.pools("vram")[0].total_bytes == 6144 * 1024 * 1024


def test_merge_keeps_provenance_and_flags_conflicts():
    _, a = parse_file("jetson/agx-thor-devkit_l4t38.4.0_jetson_release-v.txt")
    _, b = parse_file("jetson/agx-thor-devkit_nvpmodel-q.txt")
    _, c = parse_file("jetson/agx-thor-devkit_r38.2.0_jtop-error-log.txt")
    m = merge([(a.command, a.facts), (b.command, b.facts), (c.command, c.facts)])
    assert m.power.power_mode == "120W" and m.provenance["power.power_mode"] == "jetson_release -v"
    assert m.os.l4t_version == "38.4.0"
    assert any("os.l4t_version" in w and "38.2.0" in w for w in m.warnings)  # two captures, two L4Ts
    assert len([x for x in m.accelerators if x.kind == "gpu"]) == 1
    assert Facts.from_dict(m.to_dict()) == m


def test_tables_have_versions_and_keep_unknowns_none():
    v = tables.versions()
    assert {"l4t_jetpack", "tegra_soc", "jetson_modules", "qualcomm", "arm_cpu_parts", "lscpu_labels"} <= set(
        v
    )
    assert tables.jetpack_for_l4t("99.9.9") is None
    assert tables.qualcomm_part("SM8750-AB")["name"] == "Snapdragon 8 Elite"
    assert tables.qualcomm_part("X1E78100")["part"] == "X1E-78-100"
    assert tables.board_platform("sun") == ["SM8750"]
    assert tables.tegra_soc("tegra23x")["cuda_arch"] == "sm_87"
    assert tables.arm_core("0x41", "0xd42") == "Cortex-A78AE"


# ---------------------------------------------------------------- parsers without a corpus capture
# Small inputs written here in the exact layout the kernel/tools print (no public real capture in the corpus).


def test_meminfo_pools_apart():
    res = detect_mod.parse_any(
        "MemTotal:        7869472 kB\nMemFree:          512000 kB\nMemAvailable:    "
        "4000000 kB\nSwapTotal:       2097148 kB\nSwapFree:        2097148 kB\nHugePages_Total:"
        "       0\n"
    )
    assert res.command == "cat /proc/meminfo"
    kinds = {p.kind: p.total_bytes for p in res.facts.memory.pools}
    assert kinds == {"ram": 7869472 * 1024, "available": 4000000 * 1024, "swap": 2097148 * 1024}
    assert res.values["huge_pages_total"] == 0


def test_cpufreq_clusters_big_first():
    text = "\n".join(
        f"/sys/devices/system/cpu/cpu{i}/cpufreq/cpuinfo_max_freq:{k}"
        for i, k in enumerate([1785600] * 4 + [2419200] * 3 + [3302400])
    )
    res = detect_mod.parse_any(text)
    assert res.values["big_cpus"] == [7]
    assert [c.max_khz for c in res.facts.cpu.clusters] == [3302400, 2419200, 1785600]


def test_thermal_zones():
    text = (
        "/sys/class/thermal/thermal_zone0/type:cpu-0-0\n/sys/class/thermal/thermal_zone1/type:gpuss-0\n"
        "/sys/class/thermal/thermal_zone0/temp:41200\n/sys/class/thermal/thermal_zone1/temp:39800\n"
    )
    res = detect_mod.parse_any(text)
    assert res.facts.power.temperatures_c == {"cpu-0-0": 41.2, "gpuss-0": 39.8}


def test_os_release_and_build_prop():
    res = detect_mod.parse_any(
        'PRETTY_NAME="Ubuntu 22.04.5 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\n'
    )
    assert res.facts.os.distro == "Ubuntu 22.04.5 LTS" and res.values["version_id"] == "22.04"
    res = detect_mod.parse_any(
        "# begin build properties\nro.build.version.release=14\nro.build.version.sdk=34\n"
        "ro.board.platform=sun\nro.product.model=SM-S931B\n"
    )
    assert res.command == "cat build.prop"
    assert res.facts.identity.soc_name == "Snapdragon 8 Elite"


def test_lscpu_other_locales():
    de = (
        "Architektur:                     aarch64\nCPU(s):                          8\nAnbieterkennung:      ARM\n"
        "Modellname:                      Cortex-A76\nThread(s) pro Kern:              1\n"
    )
    res = detect_mod.parse_any(de)
    assert (res.values["locale"], res.values["cpus"], res.values["model_name"]) == ("de", 8, "Cortex-A76")
    zh = "架构：                    x86_64\nCPU:                     16\n型号名称：                AMD Ryzen 7\n"
    res = detect_mod.parse_any(zh)
    assert (res.values["locale"], res.values["architecture"], res.values["cpus"]) == ("zh", "x86_64", 16)


def test_cim_json_batched_with_npu():
    import json

    doc = {
        "Win32_Processor": {
            "Name": "Snapdragon(R) X Elite - X1E78100 - Qualcomm(R) Oryon(TM) CPU",
            "NumberOfCores": 12,
            "NumberOfLogicalProcessors": 12,
            "Architecture": 12,
        },
        "Win32_ComputerSystem": {
            "Manufacturer": "LENOVO",
            "Model": "83ED",
            "TotalPhysicalMemory": 34055348224,
            "SystemType": "ARM64-based PC",
        },
        "PnpDevice": [
            {
                "FriendlyName": "Snapdragon(R) X Elite - X1E78100 - Qualcomm(R) Hexagon(TM) NPU",
                "Class": "ComputeAccelerator",
                "Status": "OK",
            }
        ],
    }
    res = detect_mod.parse_any(json.dumps(doc))
    assert res.command.startswith("Get-CimInstance")
    f = res.facts
    assert f.cpu.arch == "aarch64" and f.identity.soc_part == "X1E-78-100" and f.cpu.physical_cores == 12
    npu = [a for a in f.accelerators if a.kind == "npu" and a.usable]
    assert npu and "QNN" in npu[0].apis


# ---------------------------------------------------------------- robustness (hypothesis)

PARSERS = [c.parse for c in detect_mod.COMMANDS]
CORPUS_TEXTS = [read(rel) for rel in FILES]


def _assert_total(text) -> None:
    cmd = detect_mod.detect(text)
    for p in PARSERS:
        res = p(text)
        assert isinstance(res, ParseResult)
        assert not [w for w in res.warnings if w.startswith(INTERNAL_ERROR)], (p.__name__, res.warnings)
    if cmd:
        assert isinstance(cmd.parse(text), ParseResult)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400))
def test_random_text_never_raises(text):
    _assert_total(text)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(idx=st.integers(0, len(CORPUS_TEXTS) - 1), data=st.data())
def test_corrupted_corpus_never_raises(idx, data):
    text = CORPUS_TEXTS[idx][:6000]
    ops = data.draw(
        st.lists(
            st.tuples(
                st.sampled_from(["cut", "delete", "insert", "swap_lines", "crlf"]),
                st.integers(0, max(len(text) - 1, 0)),
                st.text(max_size=12),
            ),
            max_size=5,
        )
    )
    for op, pos, junk in ops:
        if op == "cut":
            text = text[:pos]
        elif op == "delete":
            text = text[:pos] + text[pos + len(junk) + 1 :]
        elif op == "insert":
            text = text[:pos] + junk + text[pos:]
        elif op == "swap_lines":
            lines = text.split("\n")
            if len(lines) > 2:
                i = pos % (len(lines) - 1)
                lines[i], lines[i + 1] = lines[i + 1], lines[i]
            text = "\n".join(lines)
        else:
            text = text.replace("\n", "\r\n")
    _assert_total(text)


def test_bytes_and_empty_inputs():
    for p in PARSERS:
        assert "empty input" in p("").warnings
        assert isinstance(p(b"\xff\xfe garbage \x00"), ParseResult)


def test_facts_from_outputs_merges_and_keeps_wsl_quota_apart():
    outputs = {
        "uname": read("wsl/wsl2-5.10.16.3_uname-a.txt"),
        "meminfo": "MemTotal:        8049136 kB\nMemAvailable:    7000000 kB\nSwapTotal:       2097152 kB\n",
        "nvidia-smi": read("nvidia-smi/geforce-rtx3060_wsl2_drv546.80_cuda-err_nvidia-smi.txt"),  # detected
        "garbage": "???",
    }
    facts, results = detect_mod.facts_from_outputs(outputs)
    assert [r.command for r in results][:2] == ["uname -a", "cat /proc/meminfo"]
    assert facts.os.wsl_generation == 2 and facts.cpu.arch == "x86_64"
    kinds = {p.kind for p in facts.memory.pools}
    assert {"wsl_quota", "available", "swap", "vram"} <= kinds and "ram" not in kinds
    assert facts.provenance["os.kernel"] == "uname -a"
    assert any("garbage" in w for w in facts.warnings)


@pytest.mark.parametrize("name", ["lenovo-83ED-snapdragon-x-elite_systeminfo.txt"])
def test_systeminfo_with_a_label_repeated_by_a_damaged_capture_is_parsed_not_crashed(name):
    """Hypothesis found it: swapping two lines made a scalar label (System Type, Processor(s)...) hold
    a list, and the parser called .lower() on it. Every single swap with a neighbour is tried here."""
    lines = (Path(__file__).parents[1] / "corpus" / "windows" / name).read_text(encoding="utf-8").split("\n")
    for i in range(len(lines) - 1):
        swapped = list(lines)
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
        _assert_total("\n".join(swapped))
        blanked = list(lines)
        blanked[i] = ""
        _assert_total("\n".join(blanked))
