# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""The device's own build on the virtual lab: llama.cpp cross-built for linux-aarch64 (Jetson),
android-arm64 (the phone) and windows-x64, pushed, started by the persona exactly as a real device
starts it (aarch64 under qemu user mode, the .exe under wine through the Windows persona's
Start-Process), read through the same adapter, measured, labelled emulated, stopped without a trace.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from deploy.test_deploy_helpers import deploy_lab, group_members  # noqa: F401 - fixture
from edgelab.artifacts.registry import add_artifact
from edgelab.bench import BenchRequest, run_bench
from edgelab.deploy import control, follow, launch, planning
from edgelab.deploy.planning import DeployRequest
from edgelab.runtimes.binfmt import read
from edgelab.store.db import session_scope
from edgelab.store.deployments import processes

pytestmark = [pytest.mark.ssh, pytest.mark.adb, pytest.mark.slow, pytest.mark.cross]


def test_the_cross_builds_are_what_their_targets_say(
    llama_build_aarch64, llama_build_android, llama_build_windows
):
    for build, fmt, machine in (
        (llama_build_aarch64, "ELF", "aarch64"),
        (llama_build_android, "ELF", "aarch64"),
        (llama_build_windows, "PE", "x86_64"),
    ):
        m = build.manifest
        assert set(build.products) >= {"llama-server", "llama-completion", "llama-bench", "llama-tts"} or set(
            build.products
        ) >= {"llama-server.exe", "llama-completion.exe", "llama-bench.exe", "llama-tts.exe"}
        for path in build.products.values():
            b = read(path)
            assert (b.format, b.machine) == (fmt, machine), (path, b)
            if fmt == "ELF":
                assert b.static, f"{path} needs a sysroot on the device"
        assert m["toolchain_files"] and m["source_commit"].startswith("0c1e5709")
        assert any("OpenSSL off" in n for n in m["notes"])
    assert llama_build_aarch64.manifest["isa"] == "armv8.2-a+dotprod+fp16"
    assert any(n.startswith("KleidiAI off") for n in llama_build_aarch64.manifest["notes"])
    assert llama_build_windows.manifest["isa"] == "x86-64-v3"


@pytest.fixture(scope="module")
def cross_lab(deploy_lab, ssh_lab, tmp_path_factory):
    """The deploy lab, the Windows persona probed too, and a 4M random-weight GGUF; each test
    registers the device build it deploys (``_register``)."""
    from edgelab.inventory.probe import probe_devices
    from edgelab.models.synth import synth_files

    url, engine, opts = deploy_lab
    (win,) = probe_devices(engine, ["win-hx370-rtx5090"], timeout=60, ssh_config=str(ssh_lab.ssh_config_path))
    assert win.ok, win.error
    model = synth_files("spark-x2.5-cross", "4M", out_dir=tmp_path_factory.mktemp("models"))
    with session_scope(engine) as s:
        add_artifact(
            s,
            "spark-x2.5-cross",
            [model.path],
            kind="model",
            target="any",
            component="spark-x2.5",
            meta=model.meta,
            replace=True,
        )
    return url, engine, opts


BUILD_FIXTURE = {"linux-aarch64": "llama_build_aarch64", "android-arm64": "llama_build_android",
                 "windows-x64": "llama_build_windows"}  # fmt: skip


def _register(request, engine, target: str) -> None:
    """The target's cross build (the module is marked slow and cross: its fixtures are those lanes')."""
    from edgelab.runtimes import load_runtimes
    from edgelab.runtimes.build import register_build

    build = request.getfixturevalue(BUILD_FIXTURE[target])
    with session_scope(engine) as s:
        register_build(s, load_runtimes()["llama.cpp"], build, prefix=f"cross-{target}")


def _live(engine, run_id):
    from edgelab.store.runs import get_summary

    with session_scope(engine, write=False) as s:
        summ = get_summary(s, run_id, "live") or get_summary(s, run_id, "final")
        return summ.metrics if summ else None


def _wine_processes(prefix: Path) -> list[int]:
    """Processes on the lab host whose environment names this wine prefix (wineserver included)."""
    mark = f"WINEPREFIX={prefix}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if mark in env:
                out.append(int(entry))
    return out


@pytest.mark.parametrize(
    ("device", "target", "emulator"),
    [
        ("orin-agx", "linux-aarch64", "qemu-aarch64 user mode"),
        ("s25", "android-arm64", "qemu-aarch64 user mode"),
        ("win-hx370-rtx5090", "windows-x64", "wine"),
    ],
)
def test_the_device_build_runs_emulated_is_measured_and_stops_clean(
    request, cross_lab, ssh_lab, device, target, emulator
):
    _url, engine, opts = cross_lab
    _register(request, engine, target)
    req = DeployRequest(device, "spark-x2.5", runtime="llama.cpp")
    p = planning.plan(engine, req).plan
    proc = p.processes[0]
    assert proc.target == target and proc.unavailable is None
    assert proc.argv[proc.argv.index("-t") + 1] == "1"  # emulated: one thread (no spinning barriers)
    assert p.ready_timeout_s >= 150  # an emulated start-up is slow
    assert p.execution == {
        "mode": "emulated",
        "target": target,
        "emulator": emulator,
        "emulated": True,
        "label": f"emulated: the device's own build ({target}) under {emulator}",
    }
    assert any("figures are emulated" in n for n in p.notes)
    dep = launch.deploy(engine, req, opts=opts)
    th = None
    try:
        assert dep.state == "running"
        assert {pl["observed"] for pl in dep.placement} == {"cpu"}  # llama.cpp's own load log, emulated
        with session_scope(engine, write=False) as s:
            (row,) = processes(s, dep.id)
        assert "llama-server" in row.argv[0]
        th = follow.ensure_follower(engine, dep.run_id, transport=opts.transport)
        end = time.monotonic() + 240  # an emulated CPU is slow; a hang guard, not a figure
        while time.monotonic() < end:
            summ = _live(engine, dep.run_id)
            if summ and (summ.get("text") or {}).get("requests", 0) >= 1:
                break
            time.sleep(1)
        text = _live(engine, dep.run_id)["text"]
        assert text["decode_tok_s"]["p50"] > 0  # what watch shows: tokens/s, from the emulated server
        from edgelab.views.run import RunReader

        view = RunReader(engine, dep.run_id).poll()
        assert view.run["execution"]["emulated"] and view.run["execution"]["target"] == target
    finally:
        stopped = control.stop(engine, dep.run_id, opts=opts)
        if th is not None:
            th.join(60)
    assert stopped.state == "stopped"
    if device.startswith("win"):
        prefix = ssh_lab.state_dir / "ssh" / "wine" / device
        end = time.monotonic() + 60  # wineserver leaves once its last client has gone
        while _wine_processes(prefix) and time.monotonic() < end:
            time.sleep(0.5)
        assert _wine_processes(prefix) == []
    else:
        assert group_members(row.pid) == []


def test_bench_on_the_phone_is_labelled_emulated(request, cross_lab):
    _url, engine, opts = cross_lab
    _register(request, engine, "android-arm64")
    res = run_bench(
        engine,
        BenchRequest("s25", "spark-x2.5", runtime="llama.cpp", warmup=1, requests=2),
        opts=opts,
    )
    rep = res.report()
    assert res.state == "finished" and rep["virtual"] and rep["emulated"]
    assert (
        rep["note"]
        == "virtual device: emulated: the device's own build (android-arm64) under qemu-aarch64 user mode"
    )
    assert (
        res.provenance["execution"]["emulated"] and res.provenance["execution"]["target"] == "android-arm64"
    )
    assert rep["text"]["decode_tok_s"]["count"] == 2
