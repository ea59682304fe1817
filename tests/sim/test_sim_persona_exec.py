"""persona_exec: commands see the persona's files, the host never does, exit codes pass through."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from edgelab.errors import ConfigError
from edgelab.sim.persona_exec import persona_argv
from edgelab.sim.personas import PERSONAS_DIR, list_personas, load_persona


def run_in(persona: str | Path, script: str, **kw) -> subprocess.CompletedProcess:
    path = persona if isinstance(persona, Path) else PERSONAS_DIR / persona
    return subprocess.run(
        persona_argv(path, ["sh", "-c", script], **kw), capture_output=True, text=True, timeout=60
    )


def test_persona_files_appear_at_absolute_paths():
    r = run_in(
        "orin-agx",
        "cat /etc/nv_tegra_release; tr -d '\\0' < /sys/firmware/devicetree/base/model; echo; hostname",
    )
    assert r.returncode == 0, r.stderr
    corpus = (PERSONAS_DIR / "orin-agx/root/etc/nv_tegra_release").read_text()
    assert r.stdout.startswith(corpus)
    assert "NVIDIA Jetson AGX Orin Developer Kit\norin-agx\n" in r.stdout


def test_host_is_untouched():
    run_in("orin-agx", "cat /etc/nv_tegra_release >/dev/null")
    assert not Path("/etc/nv_tegra_release").exists()
    with open("/proc/self/mountinfo") as f:
        mounts = f.read().splitlines()
    assert not [m for m in mounts if str(PERSONAS_DIR) in m]
    # a second lab host's network namespace (tests/sim/test_labhost2.py, perhaps running beside this
    # test) is bound under /run/netns on purpose; no other edgelab mount may show on the host
    assert not [m for m in mounts if "edgelab" in m and " /run/netns/edgelab-" not in m]


def test_proc_overlay_differs_per_persona():
    counts = {
        p: run_in(p, "grep -c ^processor /proc/cpuinfo").stdout.strip()
        for p in ("orin-agx", "orin-nano", "thor")
    }
    assert counts == {"orin-agx": "12", "orin-nano": "6", "thor": "14"}
    host = subprocess.run(["grep", "MemTotal", "/proc/meminfo"], capture_output=True, text=True).stdout
    assert run_in("thor", "grep MemTotal /proc/meminfo").stdout.split() == ["MemTotal:", "128779252", "kB"]
    assert "128779252" not in host


def test_exit_code_and_stderr_pass_through():
    r = run_in("orin-nano", "echo out; echo err >&2; exit 42")
    assert (r.returncode, r.stdout, r.stderr) == (42, "out\n", "err\n")


def test_host_files_still_visible_and_writable(tmp_path):
    target = tmp_path / "written by persona"
    r = run_in("wsl-hx370", f"echo hi > '{target}' && ls /usr/lib/wsl/lib && uname -r")
    assert r.returncode == 0, r.stderr
    assert target.read_text() == "hi\n"
    assert "libcuda.so.1" in r.stdout and "microsoft-standard-WSL2" in r.stdout


def test_shims_first_on_path():
    r = run_in("thor", "nvpmodel -q; jetson_release | grep SoC; uname -m")
    assert r.stdout.splitlines() == ["NV Power Mode: MAXN", "0", " - SoC: tegra264", "aarch64"]


def test_tegrastats_streams_until_killed():
    argv = persona_argv(PERSONAS_DIR / "orin-agx", ["tegrastats", "--interval", "100"])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert all("RAM 4321/62801MB" in line for line in lines)


def test_device_root_provides_writable_data(tmp_path):
    r = run_in(
        "orin-agx",
        "mkdir -p /data/local/tmp && echo x > /data/local/tmp/f && ls /sdcard",
        device_root=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "data/local/tmp/f").read_text() == "x\n"
    assert not Path("/data/local/tmp/f").exists()


def test_persona_files_are_read_only():
    r = run_in("orin-agx", "echo tampered > /etc/nv_tegra_release")
    assert r.returncode != 0
    assert "R36" in (PERSONAS_DIR / "orin-agx/root/etc/nv_tegra_release").read_text()


def test_missing_persona_dir_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError):
        persona_argv(tmp_path / "nope", ["true"])


def test_every_persona_file_names_its_source():
    ssh = list_personas("ssh")
    assert [p.name for p in ssh] == [
        "orin-agx",
        "orin-nano",
        "thor",
        "wsl-hx370",
        "win-hx370-rtx5090",
        "xelite-pc",
    ]
    for p in ssh:
        assert p.files, p.name
        for f in p.files:
            assert ("source" in f) != ("synthetic" in f), (p.name, f)
            if "source" in f:
                rel = f["source"].removeprefix("../shared/corpus/probe/")
                corpus = Path("/work/shared/corpus/probe") / rel
                if corpus.exists() and not f.get("note"):  # an unannotated source is a byte-for-byte copy
                    mine = p.path / ("root" + f["path"] if f["path"].startswith("/") else f["path"])
                    assert mine.read_bytes() == corpus.read_bytes(), (p.name, f["path"])
    assert load_persona("orin-agx").address == "127.0.0.11"
