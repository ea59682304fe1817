"""No build on the wrong machine: every build target against every persona's facts, in the pure
check and through a plan (refused before anything is pushed, with code, device, build, what the
device is and what to build); how the virtual lab runs each target; product headers checked."""

from __future__ import annotations

import pytest
from probe.test_profile_classify import PERSONA_ENTRY, PERSONAS, persona_facts

from edgelab.runtimes import load_runtimes
from edgelab.runtimes.binfmt import Binary, mismatch
from edgelab.runtimes.emulation import execution
from edgelab.runtimes.targets import Target, cpu_targets, mismatches, platform_of

# What each persona is, said independently of its files: (OS, CPU architecture, NVIDIA GPU arch)
PLATFORMS = {
    "orin-agx": ("linux", "aarch64", 87),
    "orin-nano": ("linux", "aarch64", 87),
    "thor": ("linux", "aarch64", 110),
    "wsl-hx370": ("linux", "x86_64", None),  # its GPU's compute capability is not in the offline files
    "win-hx370-rtx5090": ("windows", "x86_64", None),
    "xelite-pc": ("windows", "aarch64", None),
    "s25": ("android", "aarch64", None),
    "s24": ("android", "aarch64", None),
    "rb3g2": ("android", "aarch64", None),
    "sa8775p": ("android", "aarch64", None),
}
RECIPES = {
    t: r
    for spec in load_runtimes().values()
    for t, r in spec.targets.items()
    if spec.name in ("llama.cpp", "mnn", "ncnn", "executorch")
}
TARGETS = sorted({*RECIPES, "linux-x86_64-cuda"})


@pytest.fixture(scope="module")
def facts():
    return {name: persona_facts(PERSONAS / name) for name in PERSONA_ENTRY}


def _cuda_archs(target: str) -> list[str]:
    from edgelab.runtimes.build import cuda_archs

    recipe = RECIPES.get(target)
    if recipe and recipe.options:  # linux-x86_64-cuda: built for the architecture it is given
        recipe = recipe.with_options({"cuda_arch": "90"})
    return cuda_archs(recipe.flags) if recipe else []


def _expected_ok(persona: str, target: str) -> bool:
    os_name, arch, sm = PLATFORMS[persona]
    t = Target.parse(target)
    if (t.os, t.arch) != (os_name, arch):
        return False
    if t.cuda:
        want = [int("".join(ch for ch in a if ch.isdigit())) for a in _cuda_archs(target)]
        return sm is not None and (not want or sm in want)
    return True


def test_the_personas_are_all_covered():
    assert set(PLATFORMS) == set(PERSONA_ENTRY)
    assert {"linux-x86_64", "linux-aarch64", "android-arm64", "windows-x64", "windows-arm64"} <= set(TARGETS)


@pytest.mark.parametrize("persona", sorted(PLATFORMS))
def test_every_target_against_every_persona(facts, persona):
    plat = platform_of(facts[persona])
    assert (plat.os, plat.arch) == PLATFORMS[persona][:2]
    for target in TARGETS:
        isa = RECIPES[target].isa if target in RECIPES else None
        got = mismatches(target, isa, plat, _cuda_archs(target))
        assert (not got) == _expected_ok(persona, target), (persona, target, got)
        t = Target.parse(target)
        if t.os != plat.os:
            assert any(m.startswith("OS:") for m in got)
        elif t.arch != plat.arch:
            assert any(m.startswith("architecture:") for m in got)


def test_the_isa_is_checked_on_the_device_facts(facts):
    orin = platform_of(facts["orin-agx"])
    assert mismatches("linux-aarch64", "armv8.2-a+dotprod+fp16", orin) == []
    assert mismatches("linux-aarch64", "armv8.6-a+i8mm", orin) == [
        "ISA: the build needs armv8.6-a+i8mm; the device's CPU lacks i8mm"
    ]
    # Windows reports no cpuid flags: the CPU family's level stands in, and says where it came from
    win = platform_of(facts["win-hx370-rtx5090"])
    assert "Ryzen AI 9 HX 370" in win.extra["flags_from"] and "x86-64-v4" in win.extra["flags_from"]
    assert mismatches("windows-x64", "x86-64-v3", win) == []


def test_cuda_builds_need_the_gpu_they_hold_code_for(facts):
    thor = platform_of(facts["thor"])
    assert mismatches("linux-aarch64-cuda-sm87", None, thor, ["87-real"]) == [
        "CUDA: its GPU is sm_110; the build holds code for sm_87 only"
    ]
    assert mismatches("linux-aarch64-cuda-sm110", None, thor, ["110-real"]) == []
    wsl = platform_of(facts["wsl-hx370"])
    assert "architecture is unknown" in mismatches("linux-x86_64-cuda", None, wsl, ["90-real"])[0]
    s25 = platform_of(facts["s25"])
    assert mismatches("linux-x86_64-cuda", None, s25)[0].startswith("OS:")


def test_the_virtual_lab_runs_each_target_its_own_way():
    assert execution("linux-aarch64").emulator == "qemu-aarch64 user mode"
    assert execution("android-arm64").emulated
    assert execution("linux-x86_64").mode == "native"
    win = execution("windows-x64")
    assert win.emulated and win.emulator == "wine"
    arm = execution("windows-arm64")
    assert arm.missing and "wine runs x64 ones only" in arm.missing
    lab = execution("linux-x86_64", lab_host_build=True)
    assert lab.mode == "lab-host-build" and "--lab-host-build" in lab.label()
    assert cpu_targets(["linux-aarch64-cuda-sm87", "linux-aarch64"]) == ["linux-aarch64"]


def test_a_product_is_checked_against_its_target():
    assert mismatch(Binary("ELF", "aarch64", True), "linux-aarch64") is None
    assert mismatch(Binary("ELF", "aarch64", True), "android-arm64") is None
    assert (
        mismatch(Binary("ELF", "x86_64", False), "linux-aarch64")
        == "is ELF for x86_64, the target is aarch64"
    )
    assert (
        mismatch(Binary("ELF", "x86_64", False), "windows-x64")
        == "is ELF (x86_64), a windows-x64 program is PE"
    )
    assert mismatch(Binary("PE", "x86_64"), "windows-x64") is None


# ------------------------------------------------------------------ through a plan


PLAN_TARGETS = ["linux-x86_64", "linux-aarch64", "android-arm64", "windows-x64", "windows-arm64",
                "linux-aarch64-cuda-sm87", "linux-aarch64-cuda-sm110"]  # fmt: skip


@pytest.fixture(scope="module")
def planned_db(tmp_path_factory, facts):
    """An offline lab database: one real (not virtual) device per persona, with the facts its
    files give, and a registered llama.cpp build (a small stand-in file) for each target."""
    from edgelab.artifacts.registry import add_artifact
    from edgelab.store import db as dbmod
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.devices import add_device
    from edgelab.store.models import Device, ProbeSnapshot
    from edgelab.store.snapshots import add_snapshot, facts_hash

    tmp = tmp_path_factory.mktemp("targets")
    dbmod.dispose_engines()
    engine = get_engine(str(tmp / "t.db"))
    model = tmp / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(64))
    with session_scope(engine) as s:
        for name, f in facts.items():
            os_name = PLATFORMS[name][0]
            dev = add_device(
                s,
                Device(
                    name=name,
                    transport="adb" if os_name == "android" else "ssh",
                    adb_serial=f"SER-{name}" if os_name == "android" else None,
                    ssh_host=None if os_name == "android" else f"{name}.lab",
                    ssh_user="lab",
                    shell={"android": "toybox", "windows": "powershell"}.get(os_name, "posix"),
                ),
            )
            s.flush()
            data = f.to_dict()
            add_snapshot(
                s,
                ProbeSnapshot(
                    device_id=dev.id,
                    device_name=name,
                    edgelab_version="test",
                    family=os_name,
                    ok=True,
                    facts=data,
                    facts_hash=facts_hash(data),
                ),
            )
        add_artifact(s, "spark-x2.5-test", [model], kind="model", target="any", component="spark-x2.5",
                     meta={"weights": "random"})  # fmt: skip
        for target in PLAN_TARGETS:
            exe = tmp / target / ("llama-server.exe" if target.startswith("windows") else "llama-server")
            exe.parent.mkdir()
            exe.write_bytes(target.encode())
            add_artifact(
                s,
                f"llama.cpp-{target}-llama-server",
                [exe],
                kind="runtime",
                target=target,
                component="llama.cpp",
                meta={
                    "runtime": "llama.cpp",
                    "product": "llama-server",
                    "build_key": f"key-{target}",
                    "isa": RECIPES[target].isa,
                    "cuda_archs": _cuda_archs(target),
                },
            )
    yield engine
    dbmod.dispose_engines()


@pytest.mark.parametrize("persona", sorted(PLATFORMS))
def test_every_target_against_every_persona_through_a_plan(planned_db, persona):
    from edgelab.deploy.planning import DeployRequest, plan

    for target in PLAN_TARGETS:
        req = DeployRequest(persona, "spark-x2.5", runtime="llama.cpp", strategy="S3", target=target)
        planned = plan(planned_db, req)
        r = planned.refusal
        if _expected_ok(persona, target):
            assert r is None or r.code != "build_target_mismatch", (persona, target, r)
            continue
        assert r is not None and r.code == "build_target_mismatch", (persona, target, r)
        assert r.device == persona
        assert f"build llama.cpp-{target}-llama-server is for {target}" in r.detail
        assert f"{persona} is {PLATFORMS[persona][0]} {PLATFORMS[persona][1]}" in r.detail
        own = {"linux": "linux-{}", "android": "android-arm64", "windows": "windows-{}"}[
            PLATFORMS[persona][0]
        ]
        arch = {"x86_64": "x86_64", "aarch64": "aarch64"}[PLATFORMS[persona][1]]
        want = own.format(
            arch if PLATFORMS[persona][0] == "linux" else {"x86_64": "x64", "aarch64": "arm64"}[arch]
        )
        assert f"edgelab runtime build llama.cpp --target {want}" in r.remedy, r.remedy
        assert "cannot run on" in planned.plan.processes[0].unavailable


def test_a_dry_run_on_the_wrong_os_exits_1_with_the_refusal(planned_db, tmp_path):
    import json

    from typer.testing import CliRunner

    from edgelab.cli import app

    url = str(planned_db.url)
    res = CliRunner().invoke(
        app,
        ["--db", url, "deploy", "spark-x2.5", "--device", "win-hx370-rtx5090", "--runtime", "llama.cpp",
         "--target", "linux-x86_64", "--dry-run", "--json"],
    )  # fmt: skip
    assert res.exit_code == 1, res.output
    ref = json.loads(res.stdout)["refusal"]
    assert ref["code"] == "build_target_mismatch" and ref["device"] == "win-hx370-rtx5090"
    assert "OS: the build is for linux (ELF), the device runs windows" in ref["message"]
    assert "--target windows-x64" in ref["remedy"]


def test_a_cuda_target_is_built_for_the_gpu_architecture_it_is_given(monkeypatch, tmp_path):
    from edgelab.errors import BuildError
    from edgelab.runtimes.build import cuda_archs, ensure_build

    spec = load_runtimes()["llama.cpp"]
    recipe = spec.targets["linux-x86_64-cuda"]
    assert recipe.options == {"cuda_arch"}
    sm90 = recipe.with_options({"cuda_arch": "90"})
    assert "-DCMAKE_CUDA_ARCHITECTURES=90-real" in sm90.flags and cuda_archs(sm90.flags) == ["90-real"]
    assert "-DGGML_CUDA_FA_QUANTS=f16-f16" in sm90.flags
    monkeypatch.setattr("edgelab.runtimes.build.check_toolchain", lambda r, host=None: [])
    with pytest.raises(BuildError, match="needs cuda_arch"):
        ensure_build(spec, "linux-x86_64-cuda", source=tmp_path, root=tmp_path)
